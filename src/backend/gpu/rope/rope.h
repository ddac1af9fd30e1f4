#pragma once
// RoPE on q and k fused with the KV cache append (rope_kv.cu).
#include <cstdint>

#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/runtime/device_context.h"
#include "model/rope.h"

namespace rf::gpu {

// Rotates q ([n_tokens, q_dim], in place) and k by RoPE at each token's position and appends the
// rotated k and the unchanged v ([n_tokens, kv_dim]) to the cache at slots[t]. inv_freq holds
// head_dim / 2 inverse frequencies, scaling (linear, llama3) already applied (rope_inv_freq).
void launch_rope_kv_append(float* q, const float* k, const float* v, const std::int32_t* positions,
                           const std::int32_t* slots, int n_tokens, HeadShape shape, const float* inv_freq,
                           RopeLayout layout, KvCacheLayer cache, const DeviceContext& ctx);

}  // namespace rf::gpu
