// RMSNorm, optionally fused with the residual add before it; and Qwen3's per-head q/k norm.
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/quant/quantize_activations.cuh"
#include "backend/gpu/common/reduce.cuh"

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

// Rows of up to kThreads * 4 * kVectors values whose length is a multiple of 4 are held in
// registers, all their loads issued before the first use (the weight's before the wait for the kernel
// before, as no kernel writes it): decode's single row is latency-bound, and the loop above, whose
// stores to x may alias its next loads, waits on each load in turn. kVectors is the fewest that hold
// the row, so that the loops have no exits and the rounding's reductions of every vector interleave.
// At 1024 threads (64 registers each) 4 vectors fit, rows of up to 16384 values; 8 spilled.
constexpr int kMaxVectors = 4;

template <int kThreads, int kVectors>
__device__ void rms_norm_row_in_registers(float* x, const float* residual, const float* weight, int n, float eps,
                                          float* out, QuantizedActivations rounded, HalfCopy half,
                                          std::size_t first_vector) {
  const int vectors = n / 4;
  float4 w[kVectors];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    w[j] = i < vectors ? reinterpret_cast<const float4*>(weight)[i] : make_float4(0, 0, 0, 0);
  }
  begin_dependent();
  float4 v[kVectors];
  float sum_sq = 0.0f;
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    v[j] = i < vectors ? reinterpret_cast<const float4*>(x)[i] : make_float4(0, 0, 0, 0);
    if (residual && i < vectors) {
      const float4 r = reinterpret_cast<const float4*>(residual)[i];
      v[j].x += r.x, v[j].y += r.y, v[j].z += r.z, v[j].w += r.w;
    }
  }
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    if (residual && i < vectors) reinterpret_cast<float4*>(x)[i] = v[j];
    sum_sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  }
  sum_sq = block_sum<kThreads>(sum_sq);
  const float scale = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    v[j] = make_float4(v[j].x * scale * w[j].x, v[j].y * scale * w[j].y, v[j].z * scale * w[j].z, v[j].w * scale * w[j].w);
    if (i < vectors) reinterpret_cast<float4*>(out)[i] = v[j];
    if (half.data && i < vectors) {
      const bool bf16 = half.type == DType::BF16;
      reinterpret_cast<uint2*>(half.data + 4 * first_vector)[i] =
          make_uint2(float_to_16bit(v[j].x, bf16) | static_cast<unsigned>(float_to_16bit(v[j].y, bf16)) << 16,
                     float_to_16bit(v[j].z, bf16) | static_cast<unsigned>(float_to_16bit(v[j].w, bf16)) << 16);
    }
  }
  if (!rounded.codes) return;
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    round_to_int8<kThreads>(v[j], i < vectors, first_vector + i, rounded);
  }
}

// Threads of a row's block: 256, or 1024 for rows of more than 256 vectors, so that each thread holds
// fewer of them. A decode token's norm is one block whose time is its chain of dependent steps, and
// each vector a thread holds lengthens it: 1024 threads for Llama 3 8B's 4096 values sped up decode of
// one q4_0 token and of 32 bf16 sequences (measured: docs/perf_history.md, v11). The count depends on
// the row's length alone, so that a row's bits do not depend on the rows beside it (batch invariance).
constexpr int kRowThreads = 256, kLongRowThreads = 1024;
// Heads are 64 to 256 wide: a block of the widest warp keeps most threads busy.
constexpr int kHeadThreads = kMaxWarpSize;

// kVectors 0: rows too long for registers, or not of whole vectors.
template <int kThreads, int kVectors>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(float* x, const float* residual, const float* weight, int n,
                                                            float eps, float* out, QuantizedActivations rounded,
                                                            HalfCopy half) {
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * n;
  if constexpr (kVectors > 0) {
    rms_norm_row_in_registers<kThreads, kVectors>(x + offset, residual ? residual + offset : nullptr, weight, n, eps,
                                                  out + offset, rounded, half, offset / 4);
  } else {
    begin_dependent();
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
                     const DeviceContext& ctx, QuantizedActivations rounded, HalfCopy half) {
  require(rows >= 0 && n > 0, "launch_rms_norm", "empty rows or negative row count");
  check_half_copy(half, "launch_rms_norm");
  if (rows == 0) return;
  const bool vectors = n % 4 == 0 && n <= kLongRowThreads * 4 * kMaxVectors &&
                       [](auto... p) { return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...); }(x, residual, weight, out) &&
                       reinterpret_cast<std::uintptr_t>(half.data) % 8 == 0;
  // Rounding in the same pass needs whole blocks of 32 in registers; else it is a pass of its own.
  const bool round_here = rounded.codes && vectors && n % 32 == 0;
  auto kernel = rms_norm_kernel<kRowThreads, 0>;
  int threads = kRowThreads;
  if (vectors && n / 4 <= kRowThreads) {
    kernel = rms_norm_kernel<kRowThreads, 1>;
  } else if (vectors) {
    threads = kLongRowThreads;
    const int per_thread = (n / 4 + kLongRowThreads - 1) / kLongRowThreads;
    kernel = per_thread <= 1   ? rms_norm_kernel<kLongRowThreads, 1>
             : per_thread <= 2 ? rms_norm_kernel<kLongRowThreads, 2>
                               : rms_norm_kernel<kLongRowThreads, kMaxVectors>;
  }
  launch_dependent(kernel, rows, threads, 0, ctx, x, residual, weight, n, eps, out,
                   round_here ? rounded : QuantizedActivations{}, vectors ? half : HalfCopy{});
  if (rounded.codes && !round_here) launch_quantize_activations(out, rows, n, rounded, ctx);
  if (half.data && !vectors) launch_round_to_16bit(out, static_cast<std::size_t>(rows) * n, half.type, half.data, ctx);
}

void launch_qk_norm(float* q, float* k, const float* q_weight, const float* k_weight, int n_tokens, HeadShape shape,
                    float eps, const DeviceContext& ctx) {
  require(n_tokens >= 0 && shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0, "launch_qk_norm",
          "bad head shape or negative token count");
  if (n_tokens == 0) return;
  const int q_heads = n_tokens * shape.n_heads;
  const int heads = q_heads + n_tokens * shape.n_kv_heads;
  launch_dependent(qk_norm_kernel<kHeadThreads>, heads, kHeadThreads, 0, ctx, q, k, q_weight, k_weight, q_heads,
                   shape.head_dim, eps);
}

}  // namespace rf::gpu
