// A sparse layer's routing (moe.h), in one block: a warp per token picks its k experts from the
// softmax of its router logits; then the picks are grouped by expert, each expert's in token order.
// A batch has at most a few thousand picks, so one block holds them all in shared memory and the
// grouping needs no second launch.
#include <cmath>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/moe/moe.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;

// Whether expert a (probability pa) is picked before expert b: more probable, or as probable and of a
// lower index (models/llama/moe.h's stable order).
__device__ __forceinline__ bool picked_before(float pa, int a, float pb, int b) { return pa > pb || (pa == pb && a < b); }

__device__ __forceinline__ float warp_max(float v) {
  for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) v = fmaxf(v, shuffle_xor(v, mask));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) v += shuffle_xor(v, mask);
  return v;
}

// Token t's k picks, by the warp: pick j's expert and weight to lane j (none where expert is null). The
// softmax's values are recomputed in each round from the logits (the same expression, so the same bits)
// rather than kept: a lane would need n_experts / warp size registers.
__device__ void pick_experts(const float* row, int n_experts, int k, bool renormalize, int* expert, float* weight) {
  const int lane = static_cast<int>(threadIdx.x) % RF_WARP_SIZE;
  float max = -INFINITY;
  for (int e = lane; e < n_experts; e += RF_WARP_SIZE) max = fmaxf(max, row[e]);
  max = warp_max(max);
  float sum = 0.0f;
  for (int e = lane; e < n_experts; e += RF_WARP_SIZE) sum += expf(row[e] - max);
  const float inverse = 1.0f / warp_sum(sum);
  float last_p = INFINITY, chosen = 0.0f, my_p = 0.0f;
  int last = -1, my_expert = 0;
  for (int j = 0; j < k; ++j) {
    float best_p = -1.0f;
    int best = n_experts;
    for (int e = lane; e < n_experts; e += RF_WARP_SIZE) {
      const float p = expf(row[e] - max) * inverse;
      if (picked_before(last_p, last, p, e) && picked_before(p, e, best_p, best)) best_p = p, best = e;
    }
    for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) {
      const float other_p = shuffle_xor(best_p, mask);
      const int other = static_cast<int>(shuffle_xor(static_cast<float>(best), mask));  // exact below 2^24
      if (picked_before(other_p, other, best_p, best)) best_p = other_p, best = other;
    }
    last_p = best_p, last = best, chosen += best_p;
    if (lane == j) my_p = best_p, my_expert = best;
  }
  if (lane < k && expert) *expert = my_expert, *weight = renormalize ? my_p / chosen : my_p;
}

__global__ void __launch_bounds__(kThreads) route_kernel(const float* logits, int n_tokens, int n_experts, int k,
                                                         bool renormalize, ExpertRoutes routes) {
  RF_DYNAMIC_SHARED(std::uint16_t, picks);  // n_tokens * k experts
  __shared__ int begin[kMostExperts + 1];
  begin_dependent();
  const int thread = static_cast<int>(threadIdx.x), lane = thread % RF_WARP_SIZE;
  const int n_picks = n_tokens * k;
  // The trip count is the block's, so that every warp runs as many shuffles (a warp past the last token
  // picks that token's experts again and writes nothing): HIP-CPU's shuffles are block-wide barriers,
  // which warps left out of a round desynchronise for the rest of the launch and the next.
  constexpr int kWarps = kThreads / RF_WARP_SIZE;
  for (int first = 0; first < n_tokens; first += kWarps) {
    const int t = first + thread / RF_WARP_SIZE;
    const int at = min(t, n_tokens - 1) * k + min(lane, k - 1);
    pick_experts(logits + static_cast<std::size_t>(min(t, n_tokens - 1)) * n_experts, n_experts, k, renormalize,
                 t < n_tokens ? &routes.pick_expert[at] : nullptr, &routes.pick_weight[at]);
  }
  for (int e = thread; e <= n_experts; e += kThreads) begin[e] = 0;
  __syncthreads();
  for (int i = thread; i < n_picks; i += kThreads) {
    picks[i] = static_cast<std::uint16_t>(routes.pick_expert[i]);
    atomicAdd(&begin[picks[i] + 1], 1);
  }
  __syncthreads();
  if (thread == 0) {
    int slot = 0;
    for (int e = 0; e < n_experts; ++e) {
      if (begin[e + 1] > 0) routes.active[slot++] = e;
      begin[e + 1] += begin[e];
    }
    for (const int slots = min(n_picks, n_experts); slot < slots; ++slot) routes.active[slot] = -1;
  }
  __syncthreads();
  for (int e = thread; e <= n_experts; e += kThreads) routes.begin[e] = begin[e];
  // Thread e places expert e's picks, in token order; a token's picks take its entry_of slots in
  // expert order (its rank among them).
  for (int e = thread; e < n_experts; e += kThreads) {
    int entry = begin[e];
    for (int i = 0; entry < begin[e + 1]; ++i) {
      if (picks[i] != e) continue;
      const int t = i / k;
      int rank = 0;
      for (int j = 0; j < k; ++j) rank += picks[t * k + j] < e;
      routes.token[entry] = t;
      routes.weight[entry] = routes.pick_weight[i];
      routes.entry_of[t * k + rank] = entry;
      ++entry;
    }
  }
}

}  // namespace

std::size_t expert_routes_words(int n_tokens, int n_experts, int k) {
  const std::size_t picks = static_cast<std::size_t>(n_tokens) * k;
  return active_slots(n_tokens, n_experts, k) + (n_experts + 1) + 5 * picks;
}

ExpertRoutes expert_routes_at(void* base, int n_tokens, int n_experts, int k) {
  auto* words = static_cast<std::int32_t*>(base);
  const std::size_t picks = static_cast<std::size_t>(n_tokens) * k;
  ExpertRoutes r{};
  r.active = words;
  r.begin = r.active + active_slots(n_tokens, n_experts, k);
  r.token = r.begin + n_experts + 1;
  r.weight = reinterpret_cast<float*>(r.token + picks);
  r.entry_of = r.token + 2 * picks;
  r.pick_expert = r.token + 3 * picks;
  r.pick_weight = reinterpret_cast<float*>(r.token + 4 * picks);
  return r;
}

void launch_moe_route(const float* logits, int n_tokens, int n_experts, int k, bool renormalize, ExpertRoutes routes,
                      const DeviceContext& ctx) {
  require(n_experts > 0 && n_experts <= kMostExperts, "launch_moe_route", "between 1 and 1024 experts");
  require(k > 0 && k <= n_experts && k <= 32, "launch_moe_route", "between 1 and 32 experts a token, at most all of them");
  require(n_tokens >= 0 && static_cast<long long>(n_tokens) * k <= kMostPicks, "launch_moe_route",
          "too many tokens for one routing launch");
  if (n_tokens == 0) return;
  const std::size_t shared = static_cast<std::size_t>(n_tokens) * k * sizeof(std::uint16_t);
  launch_dependent(route_kernel, 1, kThreads, shared, ctx, logits, n_tokens, n_experts, k, renormalize, routes);
}

}  // namespace rf::gpu
