#pragma once
// The parts behind launch_attention (ops.h), for the tests and the benchmark to call directly: the plan
// that picks the kernels, the planned launch, and the O(S^2) materialised attention that flash
// attention replaces (the benchmark's baseline).
#include <cstddef>

#include "backend/gpu/ops.h"

namespace rf::gpu {

// How launch_attention serves a batch. Tokens alone in their sequence in the batch (decode steps) go to
// the decode kernel, cut into key ranges (flash-decoding) when the batch alone would not fill the GPU;
// the rest (prefill chunks) go to the flash-attention kernel.
struct AttentionPlan {
  bool tensor_cores;  // prefill through the mma.sync kernel (CUDA, sm_80+), else the portable one
  int decode_splits;  // key ranges per decode token, merged by a combine kernel when more than 1
};

AttentionPlan plan_attention(const AttentionBatch& batch, HeadShape shape);

// Whether the tensor-core prefill kernel runs for head_dim on this build and device.
bool tensor_core_attention_available(int head_dim);

// Scratch of the plan's split partials (none for decode_splits == 1).
std::size_t attention_workspace_bytes(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape);

// launch_attention with a given plan; workspace holds attention_workspace_bytes(plan, batch, shape).
void launch_attention_planned(const AttentionPlan& plan, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                              HeadShape shape, float scale, float* out, void* workspace, gpuStream_t stream);

// The materialised attention, fp32: per query head, scores = Q K^T (launch_gemm: cuBLAS SGEMM on CUDA),
// causal mask and softmax over the whole score matrix, then P V. One sequence (seq 0) of
// batch.max_positions keys; scratch holds materialised_attention_bytes(...) and runs on ctx's stream.
std::size_t materialised_attention_bytes(int n_tokens, int n_keys, int head_dim);
void launch_attention_materialised(GemmContext& ctx, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                                   HeadShape shape, float scale, float* out, void* scratch, gpuStream_t stream);

}  // namespace rf::gpu
