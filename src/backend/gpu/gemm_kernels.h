#pragma once
// The parts behind launch_gemm (ops.h): the project's own tiled GEMM, and the conversions that feed a
// vendor BLAS 16-bit operands. Plain C++: the vendor glue and the tests call these directly.
#include <cstddef>
#include <cstdint>

#include <span>

#include "backend/gpu/launch_check.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/vendor.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c] for t < n_tokens, by a shared-memory tiled
// kernel: W in any stored type, decoded to fp32 while its tiles are loaded; fp32 accumulation. The
// GEMM of HIP builds without a vendor BLAS.
void launch_gemm_tiled(const WeightMatrix& w, const float* x, int n_tokens, float* out, gpuStream_t stream);

// n floats rounded (to nearest even) to the bits of `type`, DType::F16 or DType::BF16.
void launch_round_to_16bit(const float* x, std::size_t n, DType type, std::uint16_t* out, gpuStream_t stream);

// Every row of a quantized W decoded to IEEE half bits, w.rows x w.cols row-major: the weight operand a
// vendor BLAS multiplies for prefill (the decode GEMV never makes such a copy).
void launch_decode_to_f16(const WeightMatrix& w, std::uint16_t* out, gpuStream_t stream);

// launch_gemm_group's argument checks, shared by the vendor glue files.
inline void check_gemm_group(std::span<const WeightProduct> products, int n_tokens) {
  require(n_tokens >= 0, "launch_gemm", "negative token count");
  for (const WeightProduct& p : products) {
    require(p.w.rows > 0 && p.w.cols > 0 && p.w.rows <= (1u << 30) && p.w.cols <= (1u << 30), "launch_gemm",
            "weight shape is empty or too large");
    require(p.w.cols == products[0].w.cols, "launch_gemm", "the products of a group must share their input width");
  }
}

}  // namespace rf::gpu
