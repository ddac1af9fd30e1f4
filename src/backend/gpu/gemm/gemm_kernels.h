#pragma once
// The parts behind launch_gemm (gemm.h): the project's own tiled GEMM, the decode batches' tensor-core
// kernels (16-bit and quantized weights), and the conversions that feed cuBLAS 16-bit operands. Plain C++: the GEMM glue
// (gemm_cublas.cpp, gemm_tiled_only.cpp) and the tests call these directly.
#include <cstddef>
#include <cstdint>

#include <span>

#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/runtime/vendor.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c] for t < n_tokens, by a shared-memory tiled
// kernel: W in any stored type, decoded to fp32 while its tiles are loaded; fp32 accumulation. The
// GEMM of HIP builds (Debian 12's ROCm has no hipBLAS or rocBLAS); CUDA builds use cuBLAS instead.
void launch_gemm_tiled(const WeightMatrix& w, const float* x, int n_tokens, float* out, const DeviceContext& ctx);

// The most tokens launch_gemm_few_tokens takes, and what its column counts are multiples of.
inline constexpr int kMostFewTokens = 32;
inline constexpr std::size_t kFewTokensColumnMultiple = 256;

// Whether this build holds launch_gemm_few_tokens's tensor-core code for the current device (CUDA, sm_80+).
bool few_tokens_gemm_available();

// Whether launch_gemm_few_tokens's blocks of row_tiles x 16 rows (2 or 3) for n_tokens fit the current
// device's shared memory per block: each does on sm_90 (227 KiB); 48 rows past 24 tokens do not on A100
// (163 KiB), and only 32 rows of up to 8 tokens do on 99 KiB GPUs.
bool few_tokens_fits(const DeviceContext& ctx, int row_tiles, int n_tokens);

// Rows a block of launch_gemm_few_tokens takes, in tiles of 16, for a matrix of `rows` and n_tokens: the
// fewest (2 or 3) whose blocks fit one wave, one a SM; 0 where none does, where past 8 tokens they would
// fill less than 3/4 of the SMs (cuBLAS then serves better), or where they do not fit.
int few_tokens_row_tiles(const DeviceContext& ctx, std::size_t rows, int n_tokens);

// out[t * w.rows + r] = sum_c W[r][c] * x16[t * w.cols + c] for t < n_tokens <= kMostFewTokens: a decode
// batch's product on the tensor cores, W bf16 or f16 and x16 rounded to the same type, fp32 sums, blocks
// of `row_tiles` x 16 rows (few_tokens_row_tiles). W's column count a multiple of kFewTokensColumnMultiple,
// both 16-byte aligned. Each token's output has the same bits whatever n_tokens is. A dependent launch
// (dependent_launch.cuh): it loads weights before it waits for the kernel before.
void launch_gemm_few_tokens(const WeightMatrix& w, const std::uint16_t* x16, int n_tokens, float* out,
                            const DeviceContext& ctx, int row_tiles);

// Whether this build holds launch_gemm_quantized_few_tokens's tensor-core code for the current device
// (CUDA, sm_80+).
bool quantized_few_tokens_available();

// out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c] for t < n_tokens <= kMostQuantizedFewTokens,
// W of a type the GEMV's integer path reads (gemv_reads_rounded) and x its int8 copy
// (launch_quantize_activations): a decode batch's product on the integer tensor cores, fp32 sums. The
// result moves by x's rounding as the GEMV's integer path does. A dependent launch
// (dependent_launch.cuh): it loads weights before it waits for the kernel before.
void launch_gemm_quantized_few_tokens(const WeightMatrix& w, QuantizedActivations x, int n_tokens, float* out,
                                      const DeviceContext& ctx);

// n floats rounded (to nearest even) to the bits of `type`, DType::F16 or DType::BF16.
void launch_round_to_16bit(const float* x, std::size_t n, DType type, std::uint16_t* out, const DeviceContext& ctx);

// Every row of a quantized W decoded to IEEE half bits, w.rows x w.cols row-major: the weight operand
// cuBLAS multiplies for prefill (the decode GEMV never makes such a copy).
void launch_decode_to_f16(const WeightMatrix& w, std::uint16_t* out, const DeviceContext& ctx);

// launch_gemm_group's argument checks, shared by the GEMM glue files.
inline void check_gemm_group(std::span<const WeightProduct> products, int n_tokens) {
  require(n_tokens >= 0, "launch_gemm", "negative token count");
  for (const WeightProduct& p : products) {
    require(p.w.rows > 0 && p.w.cols > 0 && p.w.rows <= (1u << 30) && p.w.cols <= (1u << 30), "launch_gemm",
            "weight shape is empty or too large");
    require(p.w.cols == products[0].w.cols, "launch_gemm", "the products of a group must share their input width");
  }
}

}  // namespace rf::gpu
