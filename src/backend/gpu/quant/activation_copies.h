#pragma once
// The copies of an activation that the next product reads: int8 blocks for the GEMV's integer dot
// products, and a 16-bit copy for a tensor-core GEMM; written by the kernel that makes the activation.
#include <cstddef>
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/launch_check.h"
#include "formats/dtype.h"

namespace rf::gpu {

// Activations rounded to int8 for the GEMV's integer dot products, as llama.cpp's Q8_1: each token's
// values in blocks of 32 columns, value c of block b ~= scales[b] * codes[c], with scale = max |x| / 127
// and the block's code sum (which carries Q4_0's offset of 8). Token t's codes start at
// codes + t * cols, its scales and sums at t * cols / 32; cols is a multiple of 32.
inline constexpr int kRoundedBlockCols = 32;
struct QuantizedActivations {
  std::int8_t* codes = nullptr;
  float* scales = nullptr;
  std::int32_t* code_sums = nullptr;
};

// The three arrays of a buffer for up to `tokens` tokens of up to `cols` values, and its size in bytes.
QuantizedActivations quantized_activations_at(void* base, std::size_t tokens, std::size_t cols);
std::size_t quantized_activations_bytes(std::size_t tokens, std::size_t cols);

// out = x rounded as QuantizedActivations describes, for n_tokens rows of cols values.
void launch_quantize_activations(const float* x, int n_tokens, int cols, QuantizedActivations out, const DeviceContext& ctx);

// An activation's copy rounded to 16 bits (to nearest even) for the tensor-core GEMMs of CUDA builds
// (cuBLAS, launch_gemm_few_tokens), written by the kernel that makes the activation, so that the GEMM
// needs no rounding pass of its own (a launch and a wait each; measured: docs/perf_history.md, v8).
// type: BF16 or F16.
struct HalfCopy {
  std::uint16_t* data = nullptr;
  DType type = DType::BF16;
};

// The 16-bit type cuBLAS multiplies weights of type `weights` in: bf16 for bf16, f16 for the
// others (f16, and quantized weights decoded to f16). f32 weights take SGEMM instead.
constexpr DType gemm_operand_type(DType weights) { return weights == DType::BF16 ? DType::BF16 : DType::F16; }

// Throws unless `half` is none or of a 16-bit type.
inline void check_half_copy(HalfCopy half, const char* launch) {
  require(!half.data || half.type == DType::BF16 || half.type == DType::F16, launch, "a 16-bit copy is bf16 or f16");
}

}  // namespace rf::gpu
