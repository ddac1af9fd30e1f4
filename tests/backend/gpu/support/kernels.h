#pragma once
// Kernels only the tests and benchmarks use, beside the library's: attention with its own workspace,
// the O(S^2) materialised attention that flash attention replaces (the prefill benchmark's
// baseline), and a kernel that faults on purpose.
#include <cstddef>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu::test {

// launch_attention_planned with plan_attention's plan and a workspace of its own (grown, never shrunk) for
// ctx, on ctx's stream. out[t, h*head_dim + d] = softmax(q_t,h . K^T * scale) V over the cached
// keys/values of the layer, GQA mapping head h to kv head h / (n_heads / n_kv_heads). Flash attention
// for prefill chunks, split-sequence (flash-decoding) for single-token decode; never materialises the
// score matrix.
void launch_attention(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float scale,
                      float* out, const DeviceContext& ctx);

// The materialised attention, fp32: per query head, scores = Q K^T (launch_gemm: cuBLAS SGEMM on CUDA),
// causal mask and softmax over the whole score matrix, then P V. One sequence (seq 0) of
// batch.max_positions keys; scratch holds materialised_attention_bytes(...) and it runs on ctx's stream.
std::size_t materialised_attention_bytes(int n_tokens, int n_keys, int head_dim);
void launch_attention_materialised(const DeviceContext& ctx, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                                   HeadShape shape, float scale, float* out, void* scratch);

// A one-thread kernel writing to an address no allocation has: the device faults when it runs.
void launch_illegal_write(const DeviceContext& ctx);

}  // namespace rf::gpu::test
