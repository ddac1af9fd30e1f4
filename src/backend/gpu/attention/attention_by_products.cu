// Attention of any head width, causal or not, as two matrix products per head around a row
// softmax: scores = Q K^T and Y = P V through launch_gemm (cuBLAS SGEMM on CUDA, the tiled kernel on
// HIP), a chunk of queries at a time so that the scores stay bounded. It serves what the flash
// kernel (image_attention.cu) does not: CLIP's causal text attention and the VAE's single 512-wide
// head.
#include <algorithm>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
// Scores held at once: 64 MiB of fp32.
constexpr std::size_t kMaxScores = std::size_t{16} << 20;

int query_chunk(int queries, int keys) {
  return static_cast<int>(std::clamp<std::size_t>(kMaxScores / keys, 1, queries));
}

// Row r: softmax(scale * x) over its first `seen` values (all, or first_row + r + 1 when causal),
// zeros after; the CPU reference's steps.
__global__ void __launch_bounds__(kThreads) softmax_rows_kernel(float* x, int n, float scale, int first_row, bool causal) {
  float* row = x + static_cast<std::size_t>(blockIdx.x) * n;
  const int seen = causal ? min(first_row + static_cast<int>(blockIdx.x) + 1, n) : n;
  float largest = -INFINITY;
  for (int i = threadIdx.x; i < seen; i += kThreads) largest = fmaxf(largest, row[i] * scale);
  largest = block_max<kThreads>(largest);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < seen; i += kThreads) {
    row[i] = expf(row[i] * scale - largest);
    sum += row[i];
  }
  const float inverse = 1.0f / block_sum<kThreads>(sum);
  for (int i = threadIdx.x; i < n; i += kThreads) row[i] = i < seen ? row[i] * inverse : 0.0f;
}

}  // namespace

void launch_softmax_rows(float* x, int rows, int n, float scale, int first_row, bool causal, const DeviceContext& ctx) {
  require(rows >= 0 && n > 0, "launch_softmax_rows", "empty rows or negative row count");
  if (rows == 0) return;
  launch_kernel(softmax_rows_kernel, rows, kThreads, 0, ctx.stream(), x, n, scale, first_row, causal);
  RF_GPU_CHECK_LAUNCH();
}

std::size_t attention_by_products_bytes(int queries, int keys, int head_dim) {
  return (static_cast<std::size_t>(query_chunk(queries, keys)) * keys + static_cast<std::size_t>(keys) * head_dim) *
         sizeof(float);
}

void launch_attention_by_products(const float* q, const float* k, const float* v, int batch_heads, int queries, int keys,
                                  int head_dim, float scale, bool causal, float* y, void* workspace,
                                  const DeviceContext& ctx) {
  require(queries > 0 && keys > 0 && head_dim > 0, "launch_attention_by_products", "empty attention");
  require(!causal || queries == keys, "launch_attention_by_products", "causal attention needs as many keys as queries");
  const int chunk = query_chunk(queries, keys);
  float* scores = static_cast<float*>(workspace);
  float* values_t = scores + static_cast<std::size_t>(chunk) * keys;
  const auto rows = [](int n) { return static_cast<std::size_t>(n); };
  for (int h = 0; h < batch_heads; ++h) {
    const std::size_t q_at = rows(h) * queries * head_dim, kv_at = rows(h) * keys * head_dim;
    const WeightMatrix keys_matrix{DType::F32, rows(keys), rows(head_dim), k + kv_at};
    // P V's weight matrix is V^T: [head_dim][keys].
    launch_transpose(v + kv_at, 1, rows(keys), rows(head_dim), 1, values_t, ctx);
    const WeightMatrix values_matrix{DType::F32, rows(head_dim), rows(keys), values_t};
    for (int first = 0; first < queries; first += chunk) {
      const int n = std::min(chunk, queries - first);
      launch_gemm(ctx, keys_matrix, q + q_at + rows(first) * head_dim, n, scores);
      launch_softmax_rows(scores, n, keys, scale, first, causal, ctx);
      launch_gemm(ctx, values_matrix, scores, n, y + q_at + rows(first) * head_dim);
    }
  }
}

}  // namespace rf::gpu
