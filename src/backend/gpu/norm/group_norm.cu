// GroupNorm (with SiLU after it where ResNet blocks fuse the two) and LayerNorm: Stable Diffusion's
// norms, twins of backend/cpu/image_ops. Two passes over a group or row, mean then the spread about
// it, so that values far from zero keep their precision.
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;

__device__ float silu(float v) { return v / (1.0f + __expf(-v)); }

// Block g normalises group g of an image: channels [first, first + per_group) of image g / groups.
__global__ void __launch_bounds__(kThreads) group_norm_kernel(const float* x, const float* gamma, const float* beta,
                                                              int groups, int per_group, int spatial, float eps,
                                                              bool silu_after, float* y) {
  const std::size_t size = static_cast<std::size_t>(per_group) * spatial;
  const float* in = x + blockIdx.x * size;
  float* out = y + blockIdx.x * size;
  float sum = 0.0f;
  for (std::size_t i = threadIdx.x; i < size; i += kThreads) sum += in[i];
  const float mean = block_sum<kThreads>(sum) / static_cast<float>(size);
  float squares = 0.0f;
  for (std::size_t i = threadIdx.x; i < size; i += kThreads) squares += (in[i] - mean) * (in[i] - mean);
  const float inv_std = rsqrtf(block_sum<kThreads>(squares) / static_cast<float>(size) + eps);
  const int first = static_cast<int>(blockIdx.x % groups) * per_group;
  for (std::size_t i = threadIdx.x; i < size; i += kThreads) {
    const int c = first + static_cast<int>(i / spatial);
    const float v = (in[i] - mean) * inv_std * gamma[c] + beta[c];
    out[i] = silu_after ? silu(v) : v;
  }
}

__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const float* x, int n, const float* gamma,
                                                              const float* beta, float eps, float* y) {
  const float* in = x + static_cast<std::size_t>(blockIdx.x) * n;
  float* out = y + static_cast<std::size_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += in[i];
  const float mean = block_sum<kThreads>(sum) / static_cast<float>(n);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) squares += (in[i] - mean) * (in[i] - mean);
  const float inv_std = rsqrtf(block_sum<kThreads>(squares) / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads) out[i] = (in[i] - mean) * inv_std * gamma[i] + beta[i];
}

}  // namespace

void launch_group_norm(const float* x, int batch, int channels, int spatial, int groups, const float* gamma,
                       const float* beta, float eps, bool silu_after, float* y, const DeviceContext& ctx) {
  require(batch >= 0 && spatial > 0 && groups > 0 && channels % groups == 0, "launch_group_norm",
          "channels must split into whole groups");
  if (batch == 0) return;
  group_norm_kernel<<<batch * groups, kThreads, 0, ctx.stream()>>>(x, gamma, beta, groups, channels / groups, spatial,
                                                                   eps, silu_after, y);
  RF_GPU_CHECK_LAUNCH();
}

void launch_layer_norm(const float* x, int rows, int n, const float* gamma, const float* beta, float eps, float* y,
                       const DeviceContext& ctx) {
  require(rows >= 0 && n > 0, "launch_layer_norm", "empty rows");
  if (rows == 0) return;
  layer_norm_kernel<<<rows, kThreads, 0, ctx.stream()>>>(x, n, gamma, beta, eps, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
