// Gemma 2's soft cap on the final logits: cap * tanh(x / cap), in place.
#include <algorithm>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/elementwise/elementwise.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; threads then stride

__global__ void __launch_bounds__(kThreads) softcap_kernel(float* x, std::size_t n, float cap) {
  begin_dependent();
  const float inverse = 1.0f / cap;  // the CPU reference's expression (backend/cpu/ops.cpp)
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    x[i] = cap * tanhf(x[i] * inverse);
  }
}

}  // namespace

void launch_softcap(float* x, std::size_t n, float cap, const DeviceContext& ctx) {
  require(cap > 0.0f, "launch_softcap", "the cap must be positive");
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  launch_dependent(softcap_kernel, blocks, kThreads, 0, ctx, x, n, cap);
}

}  // namespace rf::gpu
