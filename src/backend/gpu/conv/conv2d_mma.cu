// conv2d as an implicit GEMM on NVIDIA's tensor cores (conv.h): mma.sync m16n8k16, sm_80+. The product
// is Y[oc][p] = sum_k W[oc][k] P[k][p] over the patch index k = (ky, kx, c) and the output pixel p of
// every image of the batch; P is never stored: a first pass writes the image pixel-major ([n][y][x][c])
// in the weights' 16-bit type, and each block copies its tile of P from there into shared memory. With
// k ordered so, a k tile is 32 channels at one kernel position: a pixel's bounds are checked once a
// tile and its 32 values are 64 contiguous bytes, four 16-byte copies, which ldmatrix turns into
// fragments as it does the weights. A block owns 128 output channels x 128 pixels, its eight warps
// 64 x 32 each; weights and patch values stream in by cp.async, kStages - 1 tiles ahead of the
// products. Where the tiles are too few to fill the device (the UNet's innermost layers: 1280
// channels of 8 x 8 pixels), blocks split k and a second kernel sums their slices.
#include <algorithm>

#include "backend/gpu/conv/conv.h"
#include "backend/gpu/common/tensor_core.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kTileK = 32;  // patch values a k tile: whole channels of one kernel position

}  // namespace

bool conv2d_mma_order_suits(int in_channels, int kernel, DType weights) {
  return (weights == DType::F16 || weights == DType::BF16) && in_channels % kTileK == 0 && kernel > 0;
}

std::vector<std::uint16_t> conv2d_mma_order(const std::uint16_t* weights, int out_channels, int in_channels,
                                            int kernel) {
  const std::size_t positions = static_cast<std::size_t>(kernel) * kernel, patch = positions * in_channels;
  std::vector<std::uint16_t> ordered(patch * out_channels);
  for (std::size_t o = 0; o < static_cast<std::size_t>(out_channels); ++o)
    for (std::size_t c = 0; c < static_cast<std::size_t>(in_channels); ++c)
      for (std::size_t k = 0; k < positions; ++k)
        ordered[o * patch + k * in_channels + c] = weights[o * patch + c * positions + k];
  return ordered;
}

#if defined(ROCMFORGE_GPU_CUDA)

namespace {

constexpr int kLanes = 32;  // mma.sync and ldmatrix are instructions of a 32-lane warp
constexpr int kThreads = 256;
constexpr int kTileChannels = 128;  // output channels (M) a block
constexpr int kTilePixels = 128;    // output pixels (N) a block
constexpr int kWarpChannels = 64, kWarpPixels = 32;
constexpr int kStages = 4;
constexpr int kRowStride = kTileK + 8;  // halves: 16-byte rows; ldmatrix's 8 rows hit distinct banks
constexpr int kPieces = kTileK / 8;     // 16-byte pieces a row of a k tile
constexpr int kRowsPerPass = kThreads / kPieces;
static_assert(kThreads / kLanes == (kTileChannels / kWarpChannels) * (kTilePixels / kWarpPixels));
static_assert(kTileChannels % kRowsPerPass == 0 && kTilePixels % kRowsPerPass == 0);

// One k tile in shared memory, both operands k-contiguous: weights [channel][k] and patch values
// [pixel][k], 16-bit.
struct Stage {
  std::uint16_t weights[kTileChannels][kRowStride];
  std::uint16_t patches[kTilePixels][kRowStride];
};
constexpr std::size_t kSharedBytes = kStages * sizeof(Stage);

// Where a pixel's patch starts: its image (pixel-major) and the top-left corner, padding included.
struct PixelOrigin {
  const std::uint16_t* image = nullptr;  // null: past the last pixel
  int y = 0, x = 0;
};

// Where the next k tile to load sits: channel c0 at kernel position (ky, kx). Tiles load in order,
// so it moves on by additions (a division by the channel count a tile costs more than the copies).
struct TileCursor {
  int c0, ky, kx;
  __device__ void advance(const ConvShape& s) {
    c0 += kTileK;
    if (c0 < s.in_channels) return;
    c0 = 0;
    if (++kx < s.kernel) return;
    kx = 0;
    ++ky;
  }
};

// Block (x, y, z): pixels [128x, 128x + 128) of all images, output channels [128y, 128y + 128), and
// slice z of the k tiles. One slice writes y with the bias; several write their sums to
// `slices` (slice z at z * y's size) for sum_slices_kernel. Two blocks an SM (128 registers a thread)
// hide each other's waits.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads, 2) conv2d_mma_kernel(ConvShape s, int out_h, int out_w, int tiles_per_slice,
                                                                 const std::uint16_t* x, const std::uint16_t* w,
                                                                 const float* bias, float* y, float* slices) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) unsigned char shared[];
  Stage* stages = reinterpret_cast<Stage*>(shared);
  const int patch = s.in_channels * s.kernel * s.kernel;
  const int pixels = out_h * out_w;  // ConvShape's own are host code
  const long long total_pixels = static_cast<long long>(s.batch) * pixels;
  const int first_channel = blockIdx.y * kTileChannels;
  const long long first_pixel = static_cast<long long>(blockIdx.x) * kTilePixels;
  const int first_tile = blockIdx.z * tiles_per_slice;
  const int tiles = min(tiles_per_slice, patch / kTileK - first_tile);

  // This thread copies 16-byte piece my_piece of rows my_row + r * kRowsPerPass of both operands'
  // tiles: always the same weight rows and the same pixels.
  const int my_row = threadIdx.x / kPieces, my_piece = threadIdx.x % kPieces;
  constexpr int kPixelRows = kTilePixels / kRowsPerPass, kWeightRows = kTileChannels / kRowsPerPass;
  PixelOrigin origins[kPixelRows];
#pragma unroll
  for (int r = 0; r < kPixelRows; ++r) {
    if (const long long p = first_pixel + my_row + r * kRowsPerPass; p < total_pixels) {
      const int n = static_cast<int>(p / pixels), q = static_cast<int>(p % pixels);
      origins[r] = {x + static_cast<std::size_t>(n) * s.height * s.width * s.in_channels + my_piece * 8,
                    q / out_w * s.stride - s.padding, q % out_w * s.stride - s.padding};
    }
  }
  const std::uint16_t* weight_rows[kWeightRows];
#pragma unroll
  for (int r = 0; r < kWeightRows; ++r) {
    const int channel = first_channel + my_row + r * kRowsPerPass;
    weight_rows[r] = channel < s.out_channels
                         ? w + static_cast<std::size_t>(channel) * patch + first_tile * kTileK + my_piece * 8
                         : nullptr;
  }
  const int first_k = first_tile * kTileK, first_position = first_k / s.in_channels;
  TileCursor cursor{first_k % s.in_channels, first_position / s.kernel, first_position % s.kernel};
  auto load_tile = [&](int tile) {
    if (tile < tiles) {
      Stage& stage = stages[tile % kStages];
#pragma unroll
      for (int r = 0; r < kWeightRows; ++r) {
        const std::uint16_t* from = weight_rows[r];
        copy_async(&stage.weights[my_row + r * kRowsPerPass][my_piece * 8], from ? from + tile * kTileK : w,
                   from != nullptr);
      }
#pragma unroll
      for (int r = 0; r < kPixelRows; ++r) {
        const PixelOrigin& o = origins[r];
        const int iy = o.y + cursor.ky, ix = o.x + cursor.kx;
        const bool inside = o.image && iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
        const std::uint16_t* at = inside ? o.image + (static_cast<std::size_t>(iy) * s.width + ix) * s.in_channels + cursor.c0 : x;
        copy_async(&stage.patches[my_row + r * kRowsPerPass][my_piece * 8], at, inside);
      }
      cursor.advance(s);
    }
    commit_copies();  // an empty group past the last tile keeps the count wait_copies expects
  };

  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int warp_channel = warp / (kTilePixels / kWarpPixels) * kWarpChannels;
  const int warp_pixel = warp % (kTilePixels / kWarpPixels) * kWarpPixels;
  const int matrix = lane / 8, matrix_row = lane % 8;  // the ldmatrix row this lane addresses
  float acc[kWarpChannels / 16][kWarpPixels / 8][4] = {};

  for (int t = 0; t < kStages - 1; ++t) load_tile(t);
  for (int t = 0; t < tiles; ++t) {
    wait_copies<kStages - 2>();  // tile t's copies, this thread's
    __syncthreads();             // everyone's; and everyone is done with tile t - 1, whose stage loads next
    load_tile(t + kStages - 1);
    const Stage& stage = stages[t % kStages];
#pragma unroll
    for (int ks = 0; ks < kTileK / 16; ++ks) {
      unsigned a[kWarpChannels / 16][4], b[kWarpPixels / 16][4];
#pragma unroll
      for (int mi = 0; mi < kWarpChannels / 16; ++mi) {
        load_matrices(a[mi], &stage.weights[warp_channel + mi * 16 + matrix % 2 * 8 + matrix_row][ks * 16 + matrix / 2 * 8]);
      }
      // [pixel][k] is B stored column by column: matrices (pixels 0-7, k 0-7), (0-7, 8-15), (8-15,
      // 0-7), (8-15, 8-15) are b0 and b1 of two 8-pixel pieces.
#pragma unroll
      for (int nj = 0; nj < kWarpPixels / 16; ++nj) {
        load_matrices(b[nj], &stage.patches[warp_pixel + nj * 16 + matrix / 2 * 8 + matrix_row][ks * 16 + matrix % 2 * 8]);
      }
#pragma unroll
      for (int ni = 0; ni < kWarpPixels / 8; ++ni) {
        const unsigned b0 = b[ni / 2][ni % 2 * 2], b1 = b[ni / 2][ni % 2 * 2 + 1];
#pragma unroll
        for (int mi = 0; mi < kWarpChannels / 16; ++mi) {
          mma<kBf16>(acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3], b0, b1);
        }
      }
    }
  }

  // Lane l holds rows (channels) l/4 and l/4 + 8 of each 16 x 8 piece, columns (pixels) 2(l%4) + {0, 1}.
  const bool sliced = gridDim.z > 1;
  float* out = sliced ? slices + blockIdx.z * total_pixels * s.out_channels : y;
#pragma unroll
  for (int mi = 0; mi < kWarpChannels / 16; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int channel = first_channel + warp_channel + mi * 16 + lane / 4 + half * 8;
      if (channel >= s.out_channels) continue;
      const float b = bias && !sliced ? bias[channel] : 0.0f;
#pragma unroll
      for (int ni = 0; ni < kWarpPixels / 8; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const long long p = first_pixel + warp_pixel + ni * 8 + lane % 4 * 2 + e;
          if (p >= total_pixels) continue;
          const int n = static_cast<int>(p / pixels), q = static_cast<int>(p % pixels);
          out[(static_cast<std::size_t>(n) * s.out_channels + channel) * pixels + q] = acc[mi][ni][2 * half + e] + b;
        }
      }
    }
  }
#else
  __trap();  // never launched: conv2d_mma_available checks the code's architecture first
#endif
}

// y[i] = bias of i's channel + the sum of the slices' values i, in slice order.
__global__ void __launch_bounds__(kThreads) sum_slices_kernel(const float* slices, int count, std::size_t n, int channels,
                                                              int pixels, const float* bias, float* y) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    float sum = bias ? bias[i / pixels % channels] : 0.0f;
    for (int z = 0; z < count; ++z) sum += slices[z * n + i];
    y[i] = sum;
  }
}

// How many slices k is cut into: the count that finishes soonest in whole waves of blocks (two an
// SM), each slice keeping at least kMinSliceTiles tiles, and more slices only where they save a tenth
// (their sums cost a pass over the output each).
constexpr int kMinSliceTiles = 8;
constexpr int kMaxSlices = 16;

int slice_count(const ConvShape& s, int multiprocessors) {
  const long long pixels = static_cast<long long>(s.batch) * s.out_height() * s.out_width();
  const long long blocks = (pixels + kTilePixels - 1) / kTilePixels * ((s.out_channels + kTileChannels - 1) / kTileChannels);
  const int tiles = s.in_channels * s.kernel * s.kernel / kTileK;
  const long long wave = 2LL * multiprocessors;
  const auto time = [&](int slices) {  // in waves of unsliced blocks
    return static_cast<double>((blocks * slices + wave - 1) / wave) / slices;
  };
  int best = 1;
  for (int slices = 2; slices <= kMaxSlices && tiles / slices >= kMinSliceTiles; ++slices) {
    if (time(slices) < 0.9 * time(best)) best = slices;
  }
  return best;
}

}  // namespace

// Built for the device, and the device lets a block have the stages' shared memory.
bool conv2d_mma_available(const DeviceContext& ctx) {
  const auto key = reinterpret_cast<const void*>(&launch_conv2d_mma);
  return ctx.memo({key, 0, 0, 0}, [&] {
    return built_for_tensor_cores(conv2d_mma_kernel<false>) && ctx.attributes().shared_per_block >= kSharedBytes ? 1 : 0;
  }) != 0;
}

std::size_t conv2d_mma_workspace_bytes(const ConvShape& s, const DeviceContext& ctx) {
  const int slices = slice_count(s, ctx.attributes().multiprocessors);
  const std::size_t sums = slices == 1 ? 0 : static_cast<std::size_t>(slices) * s.batch * s.out_channels * s.out_height() *
                                                  s.out_width() * sizeof(float);
  return pixel_major_bytes(s.batch, s.in_channels, s.height * s.width) + sums;
}

void launch_conv2d_mma(const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y,
                       void* workspace, const DeviceContext& ctx) {
  check_conv2d(s, w, "launch_conv2d_mma");
  require(conv2d_mma_order_suits(s.in_channels, s.kernel, w.dtype) && conv2d_mma_available(ctx), "launch_conv2d_mma",
          "needs f16 or bf16 weights, in_channels a multiple of 32 and an sm_80+ build");
  const long long total_pixels = static_cast<long long>(s.batch) * s.out_height() * s.out_width();
  if (total_pixels == 0) return;
  const bool bf16 = w.dtype == DType::BF16;
  auto* x16 = static_cast<std::uint16_t*>(workspace);
  launch_to_pixel_major(x, s.batch, s.in_channels, s.height * s.width, w.dtype, x16, ctx);

  const int slices = slice_count(s, ctx.attributes().multiprocessors);
  const int tiles = s.in_channels * s.kernel * s.kernel / kTileK, per_slice = (tiles + slices - 1) / slices;
  const dim3 grid(static_cast<unsigned>((total_pixels + kTilePixels - 1) / kTilePixels),
                  (s.out_channels + kTileChannels - 1) / kTileChannels, (tiles + per_slice - 1) / per_slice);
  const auto* weights = static_cast<const std::uint16_t*>(w.data);
  auto* sums = reinterpret_cast<float*>(static_cast<std::uint8_t*>(workspace) +
                                             pixel_major_bytes(s.batch, s.in_channels, s.height * s.width));
  const auto kernel = bf16 ? conv2d_mma_kernel<true> : conv2d_mma_kernel<false>;
  // Past 48 KiB of shared memory a kernel must ask, once on each device.
  ctx.memo({reinterpret_cast<const void*>(kernel), 0, 0, 0}, [&] {
    RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSharedBytes)));
    return 1;
  });
  launch_kernel(kernel, grid, kThreads, kSharedBytes, ctx.stream(), s, s.out_height(), s.out_width(), per_slice, x16, weights,
                                                         bias, y, sums);
  RF_GPU_CHECK_LAUNCH();
  if (grid.z == 1) return;
  const std::size_t n = static_cast<std::size_t>(total_pixels) * s.out_channels;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 8192));
  launch_kernel(sum_slices_kernel, blocks, kThreads, 0, ctx.stream(), sums, static_cast<int>(grid.z), n, s.out_channels,
                                                           s.out_height() * s.out_width(), bias, y);
  RF_GPU_CHECK_LAUNCH();
}

#else  // HIP: no tensor-core path yet (the patches serve)

bool conv2d_mma_available(const DeviceContext&) { return false; }

std::size_t conv2d_mma_workspace_bytes(const ConvShape&, const DeviceContext&) { return 0; }

void launch_conv2d_mma(const ConvShape&, const float*, const WeightMatrix&, const float*, float*, void*,
                       const DeviceContext&) {
  throw_bad_launch("launch_conv2d_mma", "no tensor-core convolution in this build");
}

#endif

}  // namespace rf::gpu
