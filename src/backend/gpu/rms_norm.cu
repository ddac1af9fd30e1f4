// RMSNorm, optionally fused with the residual add before it; and Qwen3's per-head q/k norm.
#include "backend/gpu/dependent_launch.cuh"
#include "backend/gpu/launch_check.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/quantize_activations.cuh"
#include "backend/gpu/reduce.cuh"

namespace rf::gpu {

namespace {

// One row by a block of kThreads: x += residual (if any), out = x / rms(x) * weight, computed in the
// CPU reference's order. Each thread reads and writes only its own elements, so out may alias x.
template <int kThreads>
__device__ void rms_norm_row(float* x, const float* residual, const float* weight, int n, float eps, float* out) {
  float sum_sq = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float v = x[i];
    if (residual) {
      v += residual[i];
      x[i] = v;
    }
    sum_sq += v * v;
  }
  sum_sq = block_sum<kThreads>(sum_sq);
  const float scale = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads) out[i] = x[i] * scale * weight[i];
}

// Rows of up to kRowThreads * 4 * kMaxVectors values whose length is a multiple of 4 are held in
// registers, all their loads issued before the first use: decode's single row is latency-bound, and
// the loop above, whose stores to x may alias its next loads, waits on each load in turn.
constexpr int kMaxVectors = 8;

template <int kThreads>
__device__ void rms_norm_row_in_registers(float* x, const float* residual, const float* weight, int n, float eps,
                                          float* out, QuantizedActivations rounded, std::size_t first_vector) {
  const int vectors = n / 4;
  float4 v[kMaxVectors];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    v[j] = i < vectors ? reinterpret_cast<const float4*>(x)[i] : make_float4(0, 0, 0, 0);
    if (residual && i < vectors) {
      const float4 r = reinterpret_cast<const float4*>(residual)[i];
      v[j].x += r.x, v[j].y += r.y, v[j].z += r.z, v[j].w += r.w;
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    if (residual && i < vectors) reinterpret_cast<float4*>(x)[i] = v[j];
    sum_sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  }
  sum_sq = block_sum<kThreads>(sum_sq);
  const float scale = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
#pragma unroll
  for (int j = 0; j < kMaxVectors; ++j) {
    if (j * kThreads >= vectors) break;  // the same for the whole block
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    const bool has_values = i < vectors;
    float4 normed = make_float4(0, 0, 0, 0);
    if (has_values) {
      const float4 w = reinterpret_cast<const float4*>(weight)[i];
      normed = make_float4(v[j].x * scale * w.x, v[j].y * scale * w.y, v[j].z * scale * w.z, v[j].w * scale * w.w);
      reinterpret_cast<float4*>(out)[i] = normed;
    }
    if (rounded.codes) round_to_int8<kThreads>(normed, has_values, first_vector + i, rounded);
  }
}

constexpr int kRowThreads = 256;
// Heads are 64 to 256 wide: a block of the widest warp keeps most threads busy.
constexpr int kHeadThreads = kMaxWarpSize;

template <int kThreads, bool kInRegisters>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(float* x, const float* residual, const float* weight, int n,
                                                            float eps, float* out, QuantizedActivations rounded) {
  begin_dependent();
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * n;
  if constexpr (kInRegisters) {
    rms_norm_row_in_registers<kThreads>(x + offset, residual ? residual + offset : nullptr, weight, n, eps, out + offset,
                                        rounded, offset / 4);
  } else {
    rms_norm_row<kThreads>(x + offset, residual ? residual + offset : nullptr, weight, n, eps, out + offset);
  }
}

// Blocks [0, q_heads) take q's heads, the rest k's.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) qk_norm_kernel(float* q, float* k, const float* q_weight,
                                                           const float* k_weight, int q_heads, int head_dim, float eps) {
  begin_dependent();
  const int head = blockIdx.x;
  const bool is_q = head < q_heads;
  float* x = is_q ? q + static_cast<std::size_t>(head) * head_dim : k + static_cast<std::size_t>(head - q_heads) * head_dim;
  rms_norm_row<kThreads>(x, nullptr, is_q ? q_weight : k_weight, head_dim, eps, x);
}

}  // namespace

void launch_rms_norm(float* x, const float* residual, const float* weight, int rows, int n, float eps, float* out,
                     gpuStream_t stream, QuantizedActivations rounded) {
  require(rows >= 0 && n > 0, "launch_rms_norm", "empty rows or negative row count");
  if (rows == 0) return;
  const bool vectors = n % 4 == 0 && n <= kRowThreads * 4 * kMaxVectors &&
                       [](auto... p) { return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...); }(x, residual, weight, out);
  // Rounding in the same pass needs whole blocks of 32 in registers; else it is a pass of its own.
  const bool round_here = rounded.codes && vectors && n % 32 == 0;
  launch_dependent(vectors ? rms_norm_kernel<kRowThreads, true> : rms_norm_kernel<kRowThreads, false>, rows, kRowThreads,
                   0, stream, x, residual, weight, n, eps, out, round_here ? rounded : QuantizedActivations{});
  if (rounded.codes && !round_here) launch_quantize_activations(out, rows, n, rounded, stream);
}

void launch_qk_norm(float* q, float* k, const float* q_weight, const float* k_weight, int n_tokens, HeadShape shape,
                    float eps, gpuStream_t stream) {
  require(n_tokens >= 0 && shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0, "launch_qk_norm",
          "bad head shape or negative token count");
  if (n_tokens == 0) return;
  const int q_heads = n_tokens * shape.n_heads;
  const int heads = q_heads + n_tokens * shape.n_kv_heads;
  launch_dependent(qk_norm_kernel<kHeadThreads>, heads, kHeadThreads, 0, stream, q, k, q_weight, k_weight, q_heads,
                   shape.head_dim, eps);
}

}  // namespace rf::gpu
