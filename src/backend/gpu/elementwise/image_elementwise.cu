// Stable Diffusion's elementwise steps and layout changes: GEGLU, activations, sums, nearest
// resampling, padding and transposes; twins of backend/cpu/image_ops and CpuImageBackend.
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

// Grid-stride loop over n elements: i is each thread's element.
#define RF_FOR_EACH(i, n)                                                                              \
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x,                 \
                   stride_ = static_cast<std::size_t>(gridDim.x) * kThreads;                          \
       i < (n); i += stride_)

__device__ float activate(float v, Activation kind) {
  switch (kind) {
    case Activation::silu: return v / (1.0f + expf(-v));
    case Activation::gelu: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case Activation::quick_gelu: return v / (1.0f + expf(-1.702f * v));
  }
  return v;
}

__global__ void __launch_bounds__(kThreads) activation_kernel(const float* x, std::size_t n, Activation kind, float* y) {
  RF_FOR_EACH(i, n) y[i] = activate(x[i], kind);
}

__global__ void __launch_bounds__(kThreads) add_kernel(const float* a, const float* b, std::size_t n, float* y) {
  RF_FOR_EACH(i, n) y[i] = a[i] + b[i];
}

__global__ void __launch_bounds__(kThreads) add_per_plane_kernel(const float* x, const float* v, std::size_t planes,
                                                                std::size_t pixels, float* y) {
  RF_FOR_EACH(i, planes * pixels) y[i] = x[i] + v[i / pixels];
}

__global__ void __launch_bounds__(kThreads) resize_kernel(const float* x, std::size_t planes, int in_h, int in_w,
                                                         int out_h, int out_w, float* y) {
  const float scale_y = static_cast<float>(in_h) / out_h, scale_x = static_cast<float>(in_w) / out_w;
  const std::size_t plane = static_cast<std::size_t>(out_h) * out_w;
  RF_FOR_EACH(i, planes * plane) {
    const int r = static_cast<int>(i % plane / out_w), c = static_cast<int>(i % out_w);
    const int sy = min(static_cast<int>(r * scale_y), in_h - 1), sx = min(static_cast<int>(c * scale_x), in_w - 1);
    y[i] = x[i / plane * in_h * in_w + static_cast<std::size_t>(sy) * in_w + sx];
  }
}

__global__ void __launch_bounds__(kThreads) pad_kernel(const float* x, std::size_t planes, int h, int w, float* y) {
  const std::size_t plane = static_cast<std::size_t>(h + 1) * (w + 1);
  RF_FOR_EACH(i, planes * plane) {
    const int r = static_cast<int>(i % plane / (w + 1)), c = static_cast<int>(i % (w + 1));
    y[i] = r < h && c < w ? x[i / plane * h * w + static_cast<std::size_t>(r) * w + c] : 0.0f;
  }
}

// y[b][c][r][k] = x[b][r][c][k]: one thread per output element.
__global__ void __launch_bounds__(kThreads) transpose_kernel(const float* x, std::size_t batch, std::size_t rows,
                                                            std::size_t cols, std::size_t inner, float* y) {
  const std::size_t image = rows * cols * inner;
  RF_FOR_EACH(i, batch * image) {
    const std::size_t b = i / image, k = i % inner, rc = i % image / inner;
    const std::size_t c = rc / rows, r = rc % rows;
    y[i] = x[b * image + (r * cols + c) * inner + k];
  }
}

#undef RF_FOR_EACH

}  // namespace

void launch_activation(const float* x, std::size_t n, Activation kind, float* y, const DeviceContext& ctx) {
  if (n == 0) return;
  launch_kernel(activation_kernel, blocks_for(n), kThreads, 0, ctx.stream(), x, n, kind, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_add(const float* a, const float* b, std::size_t n, float* y, const DeviceContext& ctx) {
  if (n == 0) return;
  launch_kernel(add_kernel, blocks_for(n), kThreads, 0, ctx.stream(), a, b, n, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_add_per_plane(const float* x, const float* v, std::size_t planes, std::size_t pixels, float* y,
                          const DeviceContext& ctx) {
  if (planes * pixels == 0) return;
  launch_kernel(add_per_plane_kernel, blocks_for(planes * pixels), kThreads, 0, ctx.stream(), x, v, planes, pixels, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_resize_nearest(const float* x, std::size_t planes, int in_h, int in_w, int out_h, int out_w, float* y,
                           const DeviceContext& ctx) {
  require(in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0, "launch_resize_nearest", "empty planes");
  if (planes == 0) return;
  launch_kernel(resize_kernel, blocks_for(planes * out_h * out_w), kThreads, 0, ctx.stream(), x, planes, in_h, in_w, out_h, out_w, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_pad_bottom_right(const float* x, std::size_t planes, int height, int width, float* y,
                             const DeviceContext& ctx) {
  if (planes == 0) return;
  launch_kernel(pad_kernel, blocks_for(planes * (height + 1) * (width + 1)), kThreads, 0, ctx.stream(), x, planes, height, width, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_transpose(const float* x, std::size_t batch, std::size_t rows, std::size_t cols, std::size_t inner, float* y,
                      const DeviceContext& ctx) {
  const std::size_t n = batch * rows * cols * inner;
  if (n == 0) return;
  launch_kernel(transpose_kernel, blocks_for(n), kThreads, 0, ctx.stream(), x, batch, rows, cols, inner, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_geglu(const float* x, std::size_t rows, std::size_t inner, float* y, const DeviceContext& ctx) {
  if (rows == 0 || inner == 0) return;
  launch_kernel(geglu_kernel, blocks_for(rows * inner), kThreads, 0, ctx.stream(), x, rows, inner, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_upsample_nearest2x(const float* x, std::size_t planes, int height, int width, float* y,
                               const DeviceContext& ctx) {
  require(height > 0 && width > 0, "launch_upsample_nearest2x", "empty planes");
  if (planes == 0) return;
  launch_kernel(upsample_kernel, blocks_for(planes * 4 * height * width), kThreads, 0, ctx.stream(), x, planes, height, width, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
