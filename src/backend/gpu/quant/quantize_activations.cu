// Activations rounded to int8 in a pass of their own: the inputs of projections that no RMSNorm
// precedes (SwiGLU's output before down, and attention's before o where the attention does not round
// it itself).
#include <algorithm>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/quant/quantize_activations.cuh"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kBlockCols = 32;

// Thread i of the grid rounds vector i (4 values); all threads of a block run each step together.
__global__ void __launch_bounds__(kThreads) quantize_activations_kernel(const float4* x, std::size_t vectors,
                                                                        QuantizedActivations out) {
  begin_dependent();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t first = static_cast<std::size_t>(blockIdx.x) * kThreads; first < vectors; first += stride) {
    const std::size_t v = first + threadIdx.x;
    const bool has_values = v < vectors;
    round_to_int8<kThreads>(has_values ? x[v] : make_float4(0, 0, 0, 0), has_values, v, out);
  }
}

// Blocks of 32 values a buffer for `tokens` rows of up to `cols` values holds.
std::size_t blocks_of(std::size_t tokens, std::size_t cols) { return tokens * ((cols + kBlockCols - 1) / kBlockCols); }

}  // namespace

std::size_t quantized_activations_bytes(std::size_t tokens, std::size_t cols) {
  return blocks_of(tokens, cols) * (kBlockCols + sizeof(float) + sizeof(std::int32_t));
}

QuantizedActivations quantized_activations_at(void* base, std::size_t tokens, std::size_t cols) {
  const std::size_t blocks = blocks_of(tokens, cols);
  auto* codes = static_cast<std::int8_t*>(base);
  auto* scales = reinterpret_cast<float*>(codes + blocks * kBlockCols);
  return {codes, scales, reinterpret_cast<std::int32_t*>(scales + blocks)};
}

void launch_quantize_activations(const float* x, int n_tokens, int cols, QuantizedActivations out, const DeviceContext& ctx) {
  require(n_tokens >= 0 && cols > 0 && cols % kBlockCols == 0, "launch_quantize_activations",
          "columns must be a positive multiple of 32");
  require(is_aligned(x, 16) && is_aligned(out.codes, 4), "launch_quantize_activations", "misaligned x or codes");
  if (n_tokens == 0) return;
  const std::size_t vectors = static_cast<std::size_t>(n_tokens) * cols / 4;
  constexpr std::size_t kMaxBlocks = 1024;  // a grid-stride loop past that
  const std::size_t blocks = std::min(kMaxBlocks, (vectors + kThreads - 1) / kThreads);
  launch_dependent(quantize_activations_kernel, static_cast<unsigned>(blocks), kThreads, 0, ctx,
                   reinterpret_cast<const float4*>(x), vectors, out);
}

}  // namespace rf::gpu
