// Images between the backend's NCHW fp32 and pixel-major 16-bit (conv.h). Each block moves a 32 x 32
// tile of (channel, pixel) through shared memory, so that reads and writes are both whole lines:
// along pixels on the NCHW side, along channels on the pixel-major side.
#include "backend/gpu/conv/conv.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kTile = 32;
constexpr int kThreads = 256;  // 8 rows of the tile a pass

template <bool kBf16>
__global__ void __launch_bounds__(kThreads) to_pixel_major_kernel(const float* x, int channels, int pixels,
                                                                  std::uint16_t* out) {
  __shared__ float tile[kTile][kTile + 1];
  const int first_pixel = blockIdx.x * kTile, first_channel = blockIdx.y * kTile, n = blockIdx.z;
  const int col = threadIdx.x % kTile, row = threadIdx.x / kTile;
  const float* image = x + static_cast<std::size_t>(n) * channels * pixels;
  for (int r = row; r < kTile; r += kThreads / kTile) {
    const int c = first_channel + r, p = first_pixel + col;
    tile[r][col] = c < channels && p < pixels ? image[static_cast<std::size_t>(c) * pixels + p] : 0.0f;
  }
  __syncthreads();
  std::uint16_t* to = out + static_cast<std::size_t>(n) * pixels * channels;
  for (int r = row; r < kTile; r += kThreads / kTile) {
    const int p = first_pixel + r, c = first_channel + col;
    if (p < pixels && c < channels) to[static_cast<std::size_t>(p) * channels + c] = float_to_16bit(tile[col][r], kBf16);
  }
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads) from_pixel_major_kernel(const std::uint16_t* x, int channels, int pixels,
                                                                    const float* bias, float* y) {
  __shared__ float tile[kTile][kTile + 1];
  const int first_pixel = blockIdx.x * kTile, first_channel = blockIdx.y * kTile, n = blockIdx.z;
  const int col = threadIdx.x % kTile, row = threadIdx.x / kTile;
  const std::uint16_t* from = x + static_cast<std::size_t>(n) * pixels * channels;
  for (int r = row; r < kTile; r += kThreads / kTile) {
    const int p = first_pixel + r, c = first_channel + col;
    if (p < pixels && c < channels) {
      tile[col][r] = bits16_to_float(from[static_cast<std::size_t>(p) * channels + c], kBf16) + (bias ? bias[c] : 0.0f);
    }
  }
  __syncthreads();
  float* image = y + static_cast<std::size_t>(n) * channels * pixels;
  for (int r = row; r < kTile; r += kThreads / kTile) {
    const int c = first_channel + r, p = first_pixel + col;
    if (c < channels && p < pixels) image[static_cast<std::size_t>(c) * pixels + p] = tile[r][col];
  }
}

dim3 tiles(int batch, int channels, int pixels) {
  return dim3((pixels + kTile - 1) / kTile, (channels + kTile - 1) / kTile, batch);
}

void check_16bit(DType type, const char* launch) {
  require(type == DType::F16 || type == DType::BF16, launch, "pixel-major images are f16 or bf16");
}

}  // namespace

void launch_to_pixel_major(const float* x, int batch, int channels, int pixels, DType type, std::uint16_t* out,
                           const DeviceContext& ctx) {
  check_16bit(type, "launch_to_pixel_major");
  if (batch == 0 || channels == 0 || pixels == 0) return;
  const auto kernel = type == DType::BF16 ? to_pixel_major_kernel<true> : to_pixel_major_kernel<false>;
  launch_kernel(kernel, tiles(batch, channels, pixels), kThreads, 0, ctx.stream(), x, channels, pixels, out);
  RF_GPU_CHECK_LAUNCH();
}

void launch_from_pixel_major(const std::uint16_t* x, int batch, int channels, int pixels, DType type,
                             const float* bias, float* y, const DeviceContext& ctx) {
  check_16bit(type, "launch_from_pixel_major");
  if (batch == 0 || channels == 0 || pixels == 0) return;
  const auto kernel = type == DType::BF16 ? from_pixel_major_kernel<true> : from_pixel_major_kernel<false>;
  launch_kernel(kernel, tiles(batch, channels, pixels), kThreads, 0, ctx.stream(), x, channels, pixels, bias, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
