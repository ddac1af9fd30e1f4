// The attention that flash attention replaces, kept as the benchmark's baseline: one head at a time, its
// whole score matrix in memory (fp32), Q K^T and P V through launch_gemm (cuBLAS SGEMM on CUDA), the
// causal mask fused into the softmax.
#include "backend/gpu/attention/attention.cuh"
#include "backend/gpu/support/kernels.h"
#include "backend/gpu/common/reduce.cuh"

namespace rf::gpu::test {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::size_t items) { return static_cast<unsigned>((items + kThreads - 1) / kThreads); }

__device__ std::size_t thread_index() { return blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; }

// q_head[t][d] = q[t][head * head_dim + d].
__global__ void __launch_bounds__(kThreads)
    gather_head_kernel(const float* q, int q_dim, int head, int head_dim, int n_tokens, float* q_head) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(n_tokens) * head_dim) return;
  q_head[i] = q[i / head_dim * q_dim + head * head_dim + i % head_dim];
}

// out[t][head * head_dim + d] = out_head[t][d].
__global__ void __launch_bounds__(kThreads)
    scatter_head_kernel(const float* out_head, int q_dim, int head, int head_dim, int n_tokens, float* out) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(n_tokens) * head_dim) return;
  out[i / head_dim * q_dim + head * head_dim + i % head_dim] = out_head[i];
}

// keys[p][d] and values_t[d][p] (transposed: the P V product's weight matrix) of one KV head, fp32, for
// positions p < n_keys of sequence 0.
__global__ void __launch_bounds__(kThreads)
    gather_kv_kernel(KvCacheLayer cache, AttentionBatch batch, int kv_dim, int kv_head, int head_dim, int n_keys,
                     float* keys, float* values_t) {
  const std::size_t i = thread_index();
  if (i >= static_cast<std::size_t>(n_keys) * head_dim) return;
  const int p = static_cast<int>(i / head_dim), d = static_cast<int>(i % head_dim);
  const std::size_t at = attention::cache_row(batch, 0, p, kv_dim) + kv_head * head_dim + d;
  keys[i] = half_bits_to_float(cache.keys[at]);
  values_t[static_cast<std::size_t>(d) * n_keys + p] = half_bits_to_float(cache.values[at]);
}

// Row t of scores: softmax of scale * scores over positions 0..positions[t], zeros after.
__global__ void __launch_bounds__(kThreads)
    causal_softmax_kernel(float* scores, int n_keys, const std::int32_t* positions, float scale) {
  float* row = scores + static_cast<std::size_t>(blockIdx.x) * n_keys;
  const int length = min(positions[blockIdx.x] + 1, n_keys);
  float largest = -INFINITY;
  for (int i = threadIdx.x; i < length; i += kThreads) largest = fmaxf(largest, row[i] * scale);
  largest = block_max<kThreads>(largest);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < length; i += kThreads) {
    row[i] = expf(row[i] * scale - largest);
    sum += row[i];
  }
  const float inverse = 1.0f / block_sum<kThreads>(sum);
  for (int i = threadIdx.x; i < n_keys; i += kThreads) row[i] = i < length ? row[i] * inverse : 0.0f;
}

}  // namespace

std::size_t materialised_attention_bytes(int n_tokens, int n_keys, int head_dim) {
  const std::size_t floats = static_cast<std::size_t>(n_tokens) * n_keys         // one head's scores
                             + 2 * static_cast<std::size_t>(n_tokens) * head_dim  // its q and output rows
                             + 2 * static_cast<std::size_t>(n_keys) * head_dim;   // its KV head's keys and values
  return floats * sizeof(float);
}

void launch_attention_materialised(const DeviceContext& ctx, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                                   HeadShape shape, float scale, float* out, void* scratch) {
  require(shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0 && shape.head_dim > 0,
          "launch_attention_materialised", "bad head shape");
  require(batch.n_tokens > 0 && batch.max_positions > 0, "launch_attention_materialised", "empty batch");
  const int n = batch.n_tokens, n_keys = batch.max_positions, head_dim = shape.head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int q_dim = shape.n_heads * head_dim, kv_dim = shape.n_kv_heads * head_dim;
  float* scores = static_cast<float*>(scratch);
  float* q_head = scores + static_cast<std::size_t>(n) * n_keys;
  float* out_head = q_head + static_cast<std::size_t>(n) * head_dim;
  float* keys = out_head + static_cast<std::size_t>(n) * head_dim;
  float* values_t = keys + static_cast<std::size_t>(n_keys) * head_dim;
  const WeightMatrix keys_matrix{DType::F32, static_cast<std::size_t>(n_keys), static_cast<std::size_t>(head_dim), keys};
  const WeightMatrix values_matrix{DType::F32, static_cast<std::size_t>(head_dim), static_cast<std::size_t>(n_keys),
                                   values_t};
  for (int h = 0; h < shape.n_heads; ++h) {
    if (h % group == 0) {
      launch_kernel(gather_kv_kernel, blocks_for(static_cast<std::size_t>(n_keys) * head_dim), kThreads, 0, ctx.stream(), cache, batch, kv_dim, h / group, head_dim, n_keys, keys, values_t);
    }
    launch_kernel(gather_head_kernel, blocks_for(static_cast<std::size_t>(n) * head_dim), kThreads, 0, ctx.stream(), q, q_dim, h, head_dim,
                                                                                                    n, q_head);
    RF_GPU_CHECK_LAUNCH();
    launch_gemm(ctx, keys_matrix, q_head, n, scores);
    launch_kernel(causal_softmax_kernel, n, kThreads, 0, ctx.stream(), scores, n_keys, batch.positions, scale);
    RF_GPU_CHECK_LAUNCH();
    launch_gemm(ctx, values_matrix, scores, n, out_head);
    launch_kernel(scatter_head_kernel, blocks_for(static_cast<std::size_t>(n) * head_dim), kThreads, 0, ctx.stream(), out_head, q_dim, h,
                                                                                                     head_dim, n, out);
    RF_GPU_CHECK_LAUNCH();
  }
}

}  // namespace rf::gpu::test
