// Stable Diffusion's elementwise steps: GEGLU after its projection and nearest 2x upsampling; twins of
// backend/cpu/image_ops.
#include <algorithm>

#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; threads then stride

unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void __launch_bounds__(kThreads) geglu_kernel(const float* x, std::size_t rows, std::size_t inner, float* y) {
  const std::size_t n = rows * inner, stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float* hidden = x + i / inner * 2 * inner;
    const float gate = hidden[inner + i % inner];
    y[i] = hidden[i % inner] * 0.5f * gate * (1.0f + erff(gate * 0.70710678118654752f));
  }
}

__global__ void __launch_bounds__(kThreads) upsample_kernel(const float* x, std::size_t planes, int height, int width,
                                                           float* y) {
  const std::size_t out_w = 2 * static_cast<std::size_t>(width), plane = 4 * static_cast<std::size_t>(height) * width;
  const std::size_t n = planes * plane, stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const std::size_t p = i / plane, row = i % plane / out_w, col = i % out_w;
    y[i] = x[p * height * width + row / 2 * width + col / 2];
  }
}

}  // namespace

void launch_geglu(const float* x, std::size_t rows, std::size_t inner, float* y, const DeviceContext& ctx) {
  if (rows == 0 || inner == 0) return;
  geglu_kernel<<<blocks_for(rows * inner), kThreads, 0, ctx.stream()>>>(x, rows, inner, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_upsample_nearest2x(const float* x, std::size_t planes, int height, int width, float* y,
                               const DeviceContext& ctx) {
  require(height > 0 && width > 0, "launch_upsample_nearest2x", "empty planes");
  if (planes == 0) return;
  upsample_kernel<<<blocks_for(planes * 4 * height * width), kThreads, 0, ctx.stream()>>>(x, planes, height, width, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
