// A bias added to every row of a projection's output.
#include <algorithm>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/elementwise/elementwise.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; threads then stride

__global__ void __launch_bounds__(kThreads) add_bias_kernel(float* x, const float* bias, std::size_t n, int width) {
  begin_dependent();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    x[i] += bias[i % width];
  }
}

}  // namespace

void launch_add_bias(float* x, const float* bias, int rows, int width, const DeviceContext& ctx) {
  require(rows >= 0 && width > 0, "launch_add_bias", "empty rows or negative row count");
  const std::size_t n = static_cast<std::size_t>(rows) * width;
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  launch_dependent(add_bias_kernel, blocks, kThreads, 0, ctx, x, bias, n, width);
}

}  // namespace rf::gpu
