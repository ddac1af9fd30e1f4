// SwiGLU's gate: silu(gate) * up, elementwise.
#include <algorithm>

#include "backend/gpu/activation.cuh"
#include "backend/gpu/ops.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; threads then stride

__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const float* gate, const float* up, std::size_t n, float* out, HalfCopy half) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  const bool bf16 = half.type == DType::BF16;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float v = swiglu(gate[i], up[i]);
    out[i] = v;
    if (half.data) half.data[i] = float_to_16bit(v, bf16);
  }
}

}  // namespace

void launch_swiglu(const float* gate, const float* up, std::size_t n, float* out, gpuStream_t stream, HalfCopy half) {
  check_half_copy(half, "launch_swiglu");
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  swiglu_kernel<<<blocks, kThreads, 0, stream>>>(gate, up, n, out, half);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
