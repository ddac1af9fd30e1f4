// GPU sampling against the host sampler (engine/sampler.h) with grammar masks applied by
// mask_logits: greedy picks and masked, penalised logits identical, draws distributed as the host sampler's surviving tokens (chi-square), and a seed
// giving the same tokens every time.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <span>

#include "backend/gpu/sampling/sampling.h"
#include "engine/sampler.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class Sampling : public GpuTest {
 protected:
  // `rows` rows of `vocab` logits on the GPU, each with its parameters and draw counter; the penalty
  // window of `history` is shared by all rows, and so is `masks` (rows with an odd index have no
  // mask when mask_odd_rows is false). Returns the picks and leaves the masked, penalised logits in
  // `logits`.
  std::vector<std::int32_t> sample(std::vector<float>& logits, int vocab, const std::vector<SamplingParams>& params,
                                   const std::vector<std::uint64_t>& draws, std::span<const std::int32_t> history,
                                   std::span<const std::uint64_t> mask = {}, bool mask_odd_rows = true) {
    const int rows = static_cast<int>(params.size());
    std::vector<RowSampling> row_params;
    std::vector<std::int32_t> windows;
    for (int r = 0; r < rows; ++r) {
      const auto window = penalty_window(params[r], history);
      const int mask_begin = mask.empty() || (r % 2 && !mask_odd_rows) ? -1 : 0;
      row_params.push_back(row_sampling(params[r], draws[r], static_cast<int>(windows.size()),
                                        static_cast<int>(window.size()), mask_begin));
      windows.insert(windows.end(), window.begin(), window.end());
    }
    windows.push_back(0);  // never empty, so that the buffer has an address
    DeviceBuffer<float> device_logits(logits);
    DeviceBuffer<RowSampling> device_params(row_params);
    DeviceBuffer<std::int32_t> device_history(windows), counts(static_cast<std::size_t>(rows) * vocab), tokens(rows);
    DeviceBuffer<std::uint64_t> scratch(sample_scratch_keys(rows, vocab));
    std::optional<DeviceBuffer<std::uint64_t>> device_mask;
    if (!mask.empty()) device_mask.emplace(std::vector<std::uint64_t>(mask.begin(), mask.end()));
    counts.zero();
    scratch.poison();
    tokens.poison();
    launch_sample(device_logits.data(), rows, vocab, device_params.data(), device_history.data(),
                  device_mask ? device_mask->data() : nullptr, counts.data(), scratch.data(), tokens.data(), ctx());
    synchronize();
    logits = device_logits.download();
    EXPECT_EQ(counts.download(), std::vector<std::int32_t>(counts.size(), 0)) << "the penalty scratch must stay zeroed";
    return tokens.download();
  }

  // `n` draws (counters 0 .. n-1) from one row of logits, in launches of at most 2^24 logits.
  std::vector<std::int32_t> draw_many(const std::vector<float>& row, const SamplingParams& p,
                                      std::span<const std::int32_t> history, int n,
                                      std::span<const std::uint64_t> mask = {}) {
    const int vocab = static_cast<int>(row.size());
    const int per_launch = std::max(1, std::min(n, (1 << 24) / vocab));
    std::vector<std::int32_t> picks;
    for (int first = 0; first < n; first += per_launch) {
      const int rows = std::min(per_launch, n - first);
      std::vector<float> logits;
      for (int r = 0; r < rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
      std::vector<std::uint64_t> draws(rows);
      for (int r = 0; r < rows; ++r) draws[r] = static_cast<std::uint64_t>(first + r);
      const auto batch = sample(logits, vocab, std::vector<SamplingParams>(rows, p), draws, history, mask);
      picks.insert(picks.end(), batch.begin(), batch.end());
    }
    return picks;
  }

  std::vector<float> normal_logits(int vocab, float spread) {
    auto logits = random_floats(vocab, -1.0f, 1.0f);
    // A heavy upper tail, as real logits have: a few tokens far above the rest.
    for (auto& l : logits) l = spread * l * l * l + spread * 0.25f * l;
    return logits;
  }
  // A grammar's mask allowing about `fraction` of the tokens (at least one).
  std::vector<std::uint64_t> random_mask(int vocab, double fraction) {
    std::vector<std::uint64_t> mask(mask_words(vocab), 0);
    const int threshold = static_cast<int>(fraction * 1000);
    for (int id = 0; id < vocab; ++id) {
      if (random_int(0, 999) < threshold) mask[id / 64] |= std::uint64_t{1} << (id % 64);
    }
    const int one = random_int(0, vocab - 1);
    mask[one / 64] |= std::uint64_t{1} << (one % 64);
    return mask;
  }
  std::vector<std::int32_t> random_history(int length, int vocab) {
    std::vector<std::int32_t> history(length);
    for (auto& id : history) id = random_int(0, vocab - 1);
    return history;
  }
};

SamplingParams filters(double temperature, int top_k, double top_p, double min_p) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = 1234;
  return p;
}

TEST_F(Sampling, GreedyAndPenaltiesMatchTheHostSampler) {
  for (const int vocab : {1, 7, 1000, 128256}) {
    const int rows = 24;
    std::vector<float> logits;
    std::vector<SamplingParams> params(rows);
    for (int r = 0; r < rows; ++r) {
      auto row = normal_logits(vocab, 8.0f);
      // Ties at the top: the host picks the first, so must the GPU.
      if (r % 3 == 0 && vocab > 1) row[random_int(1, vocab - 1)] = *std::max_element(row.begin(), row.end());
      logits.insert(logits.end(), row.begin(), row.end());
      params[r] = filters(0.0, 40, 0.95, 0.05);
      params[r].penalty_last_n = r % 4 == 0 ? -1 : random_int(0, 80);
      params[r].repetition_penalty = r % 5 == 0 ? 1.0 : 1.0 + random_int(1, 100) / 100.0;
      params[r].frequency_penalty = random_int(0, 50) / 100.0;
      params[r].presence_penalty = random_int(0, 50) / 100.0;
    }
    const auto history = random_history(200, vocab);  // repeats: counts above 1
    auto host_logits = logits;
    std::vector<std::int32_t> expected;
    for (int r = 0; r < rows; ++r) {
      Sampler sampler(params[r]);
      expected.push_back(sampler.sample(std::span(host_logits).subspan(static_cast<std::size_t>(r) * vocab, vocab), history));
    }
    const auto picks = sample(logits, vocab, params, std::vector<std::uint64_t>(rows, 0), history);
    EXPECT_EQ(picks, expected) << "vocab " << vocab;
    std::size_t differing = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) differing += logits[i] != host_logits[i];
    EXPECT_EQ(differing, 0u) << "vocab " << vocab << ": penalised logits differ from the host's";
  }
}

// Rows under a grammar's mask (every other row unmasked in the same launch) pick what the host
// sampler picks from mask_logits' row, from masks that allow one token up to most of them.
TEST_F(Sampling, GrammarMasksMatchTheHostSampler) {
  for (const int vocab : {1, 100, 128256}) {
    for (const double fraction : {0.0, 0.01, 0.5}) {
      const int rows = 16;
      std::vector<float> logits;
      std::vector<SamplingParams> params(rows, filters(0.0, 40, 0.95, 0.05));
      for (int r = 0; r < rows; ++r) {
        const auto row = normal_logits(vocab, 8.0f);
        logits.insert(logits.end(), row.begin(), row.end());
        params[r].repetition_penalty = r % 4 == 0 ? 1.2 : 1.0;
      }
      const auto mask = random_mask(vocab, fraction);
      const auto history = random_history(50, vocab);
      auto host_logits = logits;
      std::vector<std::int32_t> expected;
      for (int r = 0; r < rows; ++r) {
        const auto row = std::span(host_logits).subspan(static_cast<std::size_t>(r) * vocab, vocab);
        if (r % 2 == 0) mask_logits(row, mask);
        expected.push_back(Sampler(params[r]).sample(row, history));
      }
      const auto picks = sample(logits, vocab, params, std::vector<std::uint64_t>(rows, 0), history, mask, false);
      EXPECT_EQ(picks, expected) << "vocab " << vocab << ", allowed fraction " << fraction;
      std::size_t differing = 0;
      for (std::size_t i = 0; i < logits.size(); ++i) differing += logits[i] != host_logits[i];
      std::printf("vocab %d, mask allowing %.2f: %zu logits differ from the host's (tolerance 0)\n", vocab, fraction, differing);
      EXPECT_EQ(differing, 0u);
    }
  }
}

// Pearson's chi-square of `picks` against the host sampler's distribution, bins with fewer than 5
// expected draws pooled; fails for a pick the host would never make or a statistic more than 5
// standard deviations high (Wilson-Hilferty), about 3e-7 of the time by chance.
void expect_host_distribution(const std::string& what, const std::vector<std::int32_t>& picks,
                              const std::vector<std::pair<std::int32_t, double>>& expected) {
  std::map<std::int32_t, int> seen;
  for (auto id : picks) ++seen[id];
  const double n = static_cast<double>(picks.size());
  double chi2 = 0, pooled_expected = 0, pooled_seen = 0;
  int bins = 0;
  for (const auto& [id, prob] : expected) {
    const auto it = seen.find(id);
    const double observed = it == seen.end() ? 0 : it->second;
    if (it != seen.end()) seen.erase(it);
    if (n * prob < 5) {
      pooled_expected += n * prob;
      pooled_seen += observed;
      continue;
    }
    chi2 += (observed - n * prob) * (observed - n * prob) / (n * prob);
    ++bins;
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++bins;
  }
  EXPECT_TRUE(seen.empty()) << what << ": " << seen.size() << " token(s) the host sampler filters out, e.g. "
                            << (seen.empty() ? -1 : seen.begin()->first);
  const double df = std::max(1, bins - 1);
  const double z = (std::cbrt(chi2 / df) - (1 - 2 / (9 * df))) / std::sqrt(2 / (9 * df));
  std::printf("[  error   ] %-44s chi2/df %.3f over %d bins, z %.2f (limit 5)%s\n", what.c_str(), chi2 / df, bins, z,
              z <= 5 ? "" : "  FAIL");
  EXPECT_LE(z, 5.0) << what;
}

TEST_F(Sampling, DrawsFollowTheHostDistribution) {
  struct Setting {
    std::string name;
    SamplingParams params;
    int vocab;
    float spread;
    int draws;
    double allowed = 1;  // the fraction of tokens a grammar's mask allows (1: no mask)
  };
  SamplingParams penalised = filters(0.8, 40, 0.95, 0.05);  // llama.cpp's defaults
  penalised.repetition_penalty = 1.3;
  penalised.frequency_penalty = 0.2;
  penalised.presence_penalty = 0.1;
  const Setting settings[] = {
      {"temperature only", filters(1.0, 0, 1.0, 0.0), 64, 3.0f, 20000},
      {"top-k 5, temperature 0.7", filters(0.7, 5, 1.0, 0.0), 300, 4.0f, 20000},
      {"top-p 0.8, temperature 1.3", filters(1.3, 0, 0.8, 0.0), 300, 4.0f, 20000},
      {"min-p 0.1", filters(1.0, 0, 1.0, 0.1), 300, 4.0f, 20000},
      {"defaults with penalties", penalised, 1000, 6.0f, 20000},
      {"top-p 0.9 over 128256 tokens", filters(1.0, 0, 0.9, 0.0), 128256, 12.0f, 4000},
      {"top-k 40 over 128256 tokens", filters(1.5, 40, 1.0, 0.0), 128256, 12.0f, 4000},
      {"defaults under a mask of 3% of 128256 tokens", filters(0.8, 40, 0.95, 0.05), 128256, 12.0f, 4000, 0.03},
      {"temperature 1 under a mask of 10% of 300", filters(1.0, 0, 1.0, 0.0), 300, 4.0f, 20000, 0.1},
  };
  for (const auto& s : settings) {
    const auto logits = normal_logits(s.vocab, s.spread);
    const auto history = random_history(100, s.vocab);
    const auto mask = s.allowed < 1 ? random_mask(s.vocab, s.allowed) : std::vector<std::uint64_t>{};
    auto host_logits = logits;
    if (!mask.empty()) mask_logits(host_logits, mask);
    const auto expected = Sampler(s.params).distribution(host_logits, history);
    expect_host_distribution(s.name, draw_many(logits, s.params, history, s.draws, mask), expected);
  }
}

TEST_F(Sampling, TiesAtTheCutOffKeepTheLowerIds) {
  // Logits on a coarse grid: many equal values, so top-k's k-th place falls among ties.
  auto logits = random_floats(200, -3.0f, 3.0f);
  for (auto& l : logits) l = std::round(l * 2) / 2;
  for (const int k : {1, 7, 30}) {
    const auto p = filters(2.0, k, 1.0, 0.0);
    auto host_logits = logits;
    const auto expected = Sampler(p).distribution(host_logits, {});
    ASSERT_EQ(expected.size(), static_cast<std::size_t>(k));
    expect_host_distribution("ties, top-k " + std::to_string(k), draw_many(logits, p, {}, 20000), expected);
  }
}

TEST_F(Sampling, SameSeedSameTokens) {
  const auto logits = normal_logits(5000, 2.0f);
  const auto p = filters(1.0, 0, 1.0, 0.0);
  const auto first = draw_many(logits, p, {}, 300), again = draw_many(logits, p, {}, 300);
  EXPECT_EQ(first, again);
  auto other_seed = p;
  other_seed.seed = p.seed + 1;
  EXPECT_NE(first, draw_many(logits, other_seed, {}, 300));
}

}  // namespace
}  // namespace rf::gpu::test
