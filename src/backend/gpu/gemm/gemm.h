#pragma once
// Prefill and decode-batch products (launch_gemm_group): cuBLAS on CUDA (gemm_cublas.cpp); on HIP the
// project's tiled kernel (gemm_tiled.cu, by way of gemm_tiled_only.cpp), as Debian 12's ROCm packages
// have neither hipBLAS nor rocBLAS.
#include <memory>
#include <span>

#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// The GEMM side of a device context (DeviceContext::gemm()): cuBLAS's handle and scratch on CUDA; on
// HIP, where Debian 12 has no hipBLAS or rocBLAS, the project's tiled kernel and nothing to hold. Not
// thread-safe.
class GemmContext;

std::unique_ptr<GemmContext> make_gemm_context(const DeviceContext& device);

// Whether launch_gemm_group multiplies a HalfCopy it is given (CUDA builds: cuBLAS), or x always (HIP
// builds: the tiled kernel, which multiplies in fp32).
bool gemm_takes_half_copy();

// The most tokens of a decode batch whose quantized products multiply x's int8 copy.
inline constexpr int kMostQuantizedFewTokens = 64;

// Whether launch_gemm_group multiplies weights of `type` for n_tokens by the int8 copy of x it is given
// (quantized decode batches, on CUDA's integer tensor cores; the result moves by x's rounding, as the
// GEMV's integer path does).
bool gemm_multiplies_rounded(DType type, int n_tokens);

// For each product, out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c] for t < n_tokens: the
// prefill products (n_tokens > 1; the decode GEMV of gemv.h serves n_tokens == 1), any stored type of W.
// The products of one group share x, so it is prepared (rounded for the tensor cores) once, or not at
// all where `half` is x already rounded to the type the products need. Where `rounded` (x's int8
// copy) is given, the products gemm_multiplies_rounded takes multiply it.
void launch_gemm_group(const DeviceContext& ctx, std::span<const WeightProduct> products, const float* x, int n_tokens,
                       HalfCopy half = {}, QuantizedActivations rounded = {});

inline void launch_gemm(const DeviceContext& ctx, const WeightMatrix& w, const float* x, int n_tokens, float* out) {
  const WeightProduct product{w, out};
  launch_gemm_group(ctx, std::span(&product, 1), x, n_tokens);
}

}  // namespace rf::gpu
