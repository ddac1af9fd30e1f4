// conv2d as products of W with gathered patches (conv.h): the portable form, the patches going through
// memory.
#include <algorithm>

#include "backend/gpu/conv/conv.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 8192;
// Patch values a band holds: 64 MiB of them, a few bands for SD's largest VAE layers.
constexpr std::size_t kBandPatchFloats = std::size_t{16} << 20;

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks)); }

std::size_t patch_size(const ConvShape& s) { return static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel; }

std::size_t band_pixels(const ConvShape& s) {
  const std::size_t pixels = static_cast<std::size_t>(s.out_height()) * s.out_width();
  return std::max<std::size_t>(1, std::min(pixels, kBandPatchFloats / patch_size(s)));
}

// patches[p][c * k * k + ky * k + kx] for output pixels [first, first + count) of one image.
__global__ void __launch_bounds__(kThreads) gather_kernel(ConvShape s, int out_w, const float* image, std::size_t first,
                                                          std::size_t count, float* patches) {
  const int k = s.kernel;
  const std::size_t patch = static_cast<std::size_t>(s.in_channels) * k * k, n = count * patch;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const std::size_t pixel = first + i / patch;
    const int j = static_cast<int>(i % patch), c = j / (k * k), ky = j / k % k, kx = j % k;
    const int iy = static_cast<int>(pixel / out_w) * s.stride - s.padding + ky;
    const int ix = static_cast<int>(pixel % out_w) * s.stride - s.padding + kx;
    const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
    patches[i] = inside ? image[(static_cast<std::size_t>(c) * s.height + iy) * s.width + ix] : 0.0f;
  }
}

// out[c][first + p] = products[p][c] + bias[c]: the band's products into the image's planes.
__global__ void __launch_bounds__(kThreads) scatter_kernel(const float* products, std::size_t count, int channels,
                                                           const float* bias, std::size_t pixels, std::size_t first,
                                                           float* out) {
  const std::size_t n = count * channels, stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const std::size_t c = i / count, p = i % count;
    out[c * pixels + first + p] = products[p * channels + c] + (bias ? bias[c] : 0.0f);
  }
}

}  // namespace

void check_conv2d(const ConvShape& s, const WeightMatrix& w, const char* launch) {
  require(s.batch >= 0 && s.in_channels > 0 && s.out_channels > 0 && s.kernel > 0 && s.stride > 0 && s.padding >= 0 &&
              s.out_height() > 0 && s.out_width() > 0,
          launch, "bad shape");
  require(w.rows == static_cast<std::size_t>(s.out_channels) && w.cols == patch_size(s), launch,
          "W must be [out_channels] rows of in_channels * kernel * kernel");
}

std::size_t conv2d_patches_workspace_bytes(const ConvShape& s) {
  return band_pixels(s) * (patch_size(s) + s.out_channels) * sizeof(float);
}

void launch_conv2d_by_patches(const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y,
                              void* workspace, const DeviceContext& ctx) {
  check_conv2d(s, w, "launch_conv2d_by_patches");
  const std::size_t pixels = static_cast<std::size_t>(s.out_height()) * s.out_width(), band = band_pixels(s);
  float* patches = static_cast<float*>(workspace);
  float* products = patches + band * patch_size(s);
  for (int n = 0; n < s.batch; ++n) {
    const float* image = x + static_cast<std::size_t>(n) * s.in_channels * s.height * s.width;
    float* out = y + static_cast<std::size_t>(n) * s.out_channels * pixels;
    for (std::size_t first = 0; first < pixels; first += band) {
      const std::size_t count = std::min(band, pixels - first);
      launch_kernel(gather_kernel, blocks_for(count * patch_size(s)), kThreads, 0, ctx.stream(), s, s.out_width(), image, first,
                                                                                      count, patches);
      RF_GPU_CHECK_LAUNCH();
      launch_gemm(ctx, w, patches, static_cast<int>(count), products);
      launch_kernel(scatter_kernel, blocks_for(count * s.out_channels), kThreads, 0, ctx.stream(), products, count, s.out_channels,
                                                                                        bias, pixels, first, out);
      RF_GPU_CHECK_LAUNCH();
    }
  }
}

}  // namespace rf::gpu
