#pragma once
// A sparse layer's routing on the device (route.cu) and the sum of its experts' outputs
// (combine.cu), the GPU twins of models/llama/moe.h's route and group_by_expert. They keep every
// count on the device, so a decode step of a mixture of experts is captured and replayed like a
// dense one: the expert GEMV (gemv.h's launch_expert_gemv) reads the groups and leaves the blocks of
// unpicked experts idle, and never reads their weights.
#include <cstddef>
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// Where a batch's routing goes: its n_tokens * k picks ("entries"), grouped by expert. Expert e's
// entries are [begin[e], begin[e + 1]), their tokens in batch order; `active` lists the experts with
// any entry, in index order, then -1 up to active_slots(...) slots.
struct ExpertRoutes {
  std::int32_t* active;
  std::int32_t* begin;     // n_experts + 1
  std::int32_t* token;     // per entry: the token it multiplies
  float* weight;           // per entry: its share of the token's output
  std::int32_t* entry_of;  // token t's j-th pick, the picks in expert order: entry_of[t * k + j]
  // Scratch: each pick's expert and weight, in token order, before grouping.
  std::int32_t* pick_expert;
  float* pick_weight;
};

// The slots `active` needs: no more experts are picked than exist or than the batch has picks.
inline int active_slots(int n_tokens, int n_experts, int k) {
  return n_tokens * k < n_experts ? n_tokens * k : n_experts;
}

// Int32 values and floats an ExpertRoutes for up to n_tokens tokens takes, and its arrays at `base`
// (that many 4-byte words of device memory).
std::size_t expert_routes_words(int n_tokens, int n_experts, int k);
ExpertRoutes expert_routes_at(void* base, int n_tokens, int n_experts, int k);

// The routing of n_tokens tokens by their router logits (n_experts per token), as route() and
// group_by_expert() in models/llama/moe.h: softmax over every expert, the k most probable (the lower
// index first among equals), their weights renormalised to sum 1 where `renormalize`. n_experts at
// most kMostExperts, n_tokens * k at most kMostPicks.
inline constexpr int kMostExperts = 1024;
inline constexpr int kMostPicks = 16384;
void launch_moe_route(const float* logits, int n_tokens, int n_experts, int k, bool renormalize, ExpertRoutes routes,
                      const DeviceContext& ctx);

// out[t] = sum over token t's picks, in expert order, of weight * expert_out[entry] (`width` values a
// row): the layer's MLP output.
void launch_moe_combine(const float* expert_out, ExpertRoutes routes, int n_tokens, int k, int width, float* out,
                        const DeviceContext& ctx);

}  // namespace rf::gpu
