// The device routing and combine (backend/gpu/moe/moe.h) against the CPU backend's routing
// (models/llama/moe.h), on fresh random logits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "backend/gpu/gpu_test.h"
#include "backend/gpu/moe/moe.h"
#include "models/llama/moe.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

// An ExpertRoutes on the device, poisoned, and its arrays read back.
class RoutesBuffer {
 public:
  RoutesBuffer(int n_tokens, int n_experts, int k)
      : n_(n_tokens), e_(n_experts), k_(k), storage_(expert_routes_words(n_tokens, n_experts, k)) {
    storage_.poison();
    routes_ = expert_routes_at(storage_.data(), n_tokens, n_experts, k);
  }
  ExpertRoutes view() const { return routes_; }

  struct Host {
    std::vector<std::int32_t> active, begin, token, entry_of;
    std::vector<float> weight;
  };
  Host download() const {
    const std::vector<std::int32_t> words = storage_.download();
    auto at = [&](const void* p) { return static_cast<std::size_t>(static_cast<const std::int32_t*>(p) - storage_.data()); };
    auto ints = [&](const std::int32_t* p, std::size_t n) {
      return std::vector<std::int32_t>(words.begin() + at(p), words.begin() + at(p) + n);
    };
    const std::size_t picks = static_cast<std::size_t>(n_) * k_;
    Host h{ints(routes_.active, active_slots(n_, e_, k_)), ints(routes_.begin, e_ + 1), ints(routes_.token, picks),
           ints(routes_.entry_of, picks), {}};
    const auto weights = ints(reinterpret_cast<const std::int32_t*>(routes_.weight), picks);
    h.weight.resize(picks);
    std::memcpy(h.weight.data(), weights.data(), picks * sizeof(float));
    return h;
  }

 private:
  int n_, e_, k_;
  DeviceBuffer<std::int32_t> storage_;
  ExpertRoutes routes_;
};

class MoeRouting : public GpuTest {
 protected:
  // Logits whose values differ by at least 1e-2 within a token (a random permutation of a ladder), so
  // that no rounding of the softmax's sums can swap two experts between the CPU and the GPU; a ladder
  // of 8 across the experts where that keeps the steps.
  std::vector<float> distinct_logits(int n_tokens, int n_experts) {
    std::vector<float> logits(static_cast<std::size_t>(n_tokens) * n_experts);
    for (int t = 0; t < n_tokens; ++t) {
      std::vector<int> order(n_experts);
      std::iota(order.begin(), order.end(), 0);
      for (int i = n_experts - 1; i > 0; --i) std::swap(order[i], order[random_int(0, i)]);
      const float offset = random_floats(1, -2.0f, 2.0f)[0];
      const float step = std::max(0.01f, 8.0f / n_experts);
      for (int e = 0; e < n_experts; ++e) logits[t * n_experts + e] = offset + step * order[e];
    }
    return logits;
  }

  // Routes `logits` on the device and checks every array against route() and group_by_expert().
  RoutesBuffer::Host expect_routing(const std::vector<float>& logits, int n, int n_experts, int k, bool renormalize) {
    const std::string name = fmt::format("{} tokens, {} of {} experts{}", n, k, n_experts, renormalize ? ", renormalised" : "");
    DeviceBuffer<float> logits_gpu(logits);
    RoutesBuffer routes(n, n_experts, k);
    launch_moe_route(logits_gpu.data(), n, n_experts, k, renormalize, routes.view(), ctx());
    synchronize();
    const RoutesBuffer::Host got = routes.download();

    std::vector<llama::ExpertChoice> choices(static_cast<std::size_t>(n) * k);
    for (int t = 0; t < n; ++t) llama::route(&logits[t * n_experts], n_experts, k, renormalize, &choices[t * k]);
    llama::ExpertGroups want;
    llama::group_by_expert(choices, n, k, n_experts, want);
    EXPECT_EQ(got.begin, want.begin) << name;
    EXPECT_EQ(got.token, want.tokens) << name;
    expect_close(name + ": weights", got.weight, want.weights, 1e-6);
    std::vector<std::int32_t> active;
    for (int e = 0; e < n_experts; ++e) if (want.begin[e + 1] > want.begin[e]) active.push_back(e);
    active.resize(active_slots(n, n_experts, k), -1);
    EXPECT_EQ(got.active, active) << name;
    // Token t's entry_of lists its own entries, their experts increasing.
    auto expert_of = [&](int entry) {
      return static_cast<int>(std::upper_bound(got.begin.begin(), got.begin.end(), entry) - got.begin.begin()) - 1;
    };
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < k; ++j) {
        const int entry = got.entry_of[t * k + j];
        const bool in_range = entry >= 0 && entry < n * k;
        EXPECT_TRUE(in_range) << name << ": token " << t << " pick " << j << ": entry " << entry;
        if (!in_range) return got;
        EXPECT_EQ(got.token[entry], t) << name;
        if (j > 0) {
          EXPECT_LT(expert_of(got.entry_of[t * k + j - 1]), expert_of(entry)) << name;
        }
      }
    }
    return got;
  }
};

TEST_F(MoeRouting, MatchesTheCpuRouting) {
  struct Case {
    int tokens, experts, k;
    bool renormalize;
  };
  // Mixtral (2 of 8), Qwen3-30B-A3B (8 of 128), a count that fills no warp evenly, 32 a token, and
  // the largest steps.
  const Case cases[] = {{1, 8, 2, true},    {7, 8, 2, true},     {64, 128, 8, true}, {512, 128, 8, false},
                        {33, 60, 4, true},  {3, 1024, 32, true}, {2048, 8, 2, true}, {1, 128, 8, false}};
  for (const Case& c : cases) expect_routing(distinct_logits(c.tokens, c.experts), c.tokens, c.experts, c.k, c.renormalize);
}

// Equal probabilities go to the lower index first, as the CPU's stable sort takes them.
TEST_F(MoeRouting, TiesGoToTheLowerIndex) {
  std::vector<float> logits(3 * 16, 0.5f);
  for (int e = 8; e < 16; ++e) logits[2 * 16 + e] = 1.0f;  // token 2: experts 8.. first
  const auto got = expect_routing(logits, 3, 16, 4, true);
  EXPECT_EQ(got.active, (std::vector<std::int32_t>{0, 1, 2, 3, 8, 9, 10, 11, -1, -1, -1, -1}));
}

TEST_F(MoeRouting, RejectsWhatItCannotRoute) {
  DeviceBuffer<float> logits(64);
  RoutesBuffer routes(1, 8, 2);
  EXPECT_THROW(launch_moe_route(logits.data(), 1, 8, 9, true, routes.view(), ctx()), Error);
  EXPECT_THROW(launch_moe_route(logits.data(), 1, 2048, 2, true, routes.view(), ctx()), Error);
  EXPECT_THROW(launch_moe_route(logits.data(), kMostPicks, 8, 2, true, routes.view(), ctx()), Error);
}

// Each token's output is its picks' rows, weighted, added in expert order (the CPU's order): exact to
// fp32's rounding of k terms.
TEST_F(MoeRouting, CombineWeighsEachTokensPicks) {
  for (const auto& [n, n_experts, k, width] : {std::tuple{1, 8, 2, 4096}, std::tuple{37, 128, 8, 2048}, std::tuple{5, 60, 4, 100}}) {
    const auto logits = distinct_logits(n, n_experts);
    DeviceBuffer<float> logits_gpu(logits);
    RoutesBuffer routes(n, n_experts, k);
    launch_moe_route(logits_gpu.data(), n, n_experts, k, true, routes.view(), ctx());
    const auto rows = random_floats(static_cast<std::size_t>(n) * k * width);
    DeviceBuffer<float> rows_gpu(rows), out(static_cast<std::size_t>(n) * width);
    out.poison();
    launch_moe_combine(rows_gpu.data(), routes.view(), n, k, width, out.data(), ctx());
    synchronize();
    const auto got = routes.download();
    std::vector<double> want(static_cast<std::size_t>(n) * width, 0.0);
    for (int entry = 0; entry < n * k; ++entry) {
      for (int c = 0; c < width; ++c) {
        want[static_cast<std::size_t>(got.token[entry]) * width + c] +=
            static_cast<double>(got.weight[entry]) * rows[static_cast<std::size_t>(entry) * width + c];
      }
    }
    expect_close(fmt::format("combine of {} tokens, {} of {} experts", n, k, n_experts), out.download(), want, 1e-6);
  }
}

}  // namespace
}  // namespace rf::gpu::test
