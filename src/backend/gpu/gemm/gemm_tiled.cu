// The project's own prefill GEMM: shared-memory tiles, W decoded from its stored type while its tile is
// loaded, fp32 accumulation. Portable (no vendor intrinsics, nothing tied to the warp width).
#include "backend/gpu/quant/dequantize_values.cuh"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

// A block computes kTileTokens x kTileRows outputs, each thread kMicro x kMicro of them.
constexpr int kTileTokens = 64, kTileRows = 64, kTileK = 64;
constexpr int kMicro = 4;
constexpr int kThreadsPerToken = kTileRows / kMicro;
constexpr int kThreads = kThreadsPerToken * (kTileTokens / kMicro);
// Tiles are stored k-major, so that a thread's kMicro tokens (or rows) at one k are one 16-byte read;
// the pad keeps those reads 16-byte aligned.
constexpr int kPad = 4;
static_assert(kMicro == 4, "the inner loop reads float4s");

using XTile = float[kTileK][kTileTokens + kPad];
using WTile = float[kTileK][kTileRows + kPad];

// Columns [k0, k0 + kTileK) of rows [row0, row0 + kTileRows) of W, decoded; zeros outside W.
// Quantized rows (and plain rows readable 16 bytes at a time, up to decoded_cols) decode whole slices;
// the rest of a plain row is read element by element.
template <class D>
__device__ void load_w_tile(const std::uint8_t* w, std::size_t row_bytes, int rows, int cols, int decoded_cols, int row0,
                            int k0, WTile& tile) {
  if constexpr (D::kPlain) {
    if (k0 + kTileK > decoded_cols) {
      for (int e = threadIdx.x; e < kTileRows * kTileK; e += kThreads) {
        const int r = e / kTileK, c = e % kTileK;
        const bool inside = row0 + r < rows && k0 + c < cols;
        tile[c][r] = inside ? D::value(w + (row0 + r) * row_bytes, k0 + c) : 0.0f;
      }
      return;
    }
  }
  if (row0 + kTileRows > rows || k0 + kTileK > cols) {  // the slices below never write these
    for (int e = threadIdx.x; e < kTileRows * kTileK; e += kThreads) {
      const int r = e / kTileK, c = e % kTileK;
      if (row0 + r >= rows || k0 + c >= cols) tile[c][r] = 0.0f;
    }
  }
  // Slices are decoded by groups; a group wider than the tile (Q6_K) is decoded for each of its tiles,
  // keeping the runs that fall inside.
  constexpr int kGroupCols = kSliceGroupCols<D> > kTileK ? kSliceGroupCols<D> : kTileK;
  constexpr int kGroupSlices = kGroupCols * D::kSlicesPerBlock / D::kBlockElems;
  const int first_slice = k0 / kGroupCols * kGroupSlices;
  const int row_slices = decoded_cols / D::kBlockElems * D::kSlicesPerBlock;
  for (int e = threadIdx.x; e < kTileRows * kGroupSlices; e += kThreads) {
    const int r = e / kGroupSlices, s = first_slice + e % kGroupSlices;
    if (row0 + r >= rows || s >= row_slices) continue;
    typename D::Slice slice;
    D::decode(w + (row0 + r) * row_bytes, cols / D::kBlockElems, s, slice);
#pragma unroll
    for (int run = 0; run < D::kRuns; ++run) {
      const int c = slice.column[run] - k0;
      if (kGroupCols > kTileK && (c < 0 || c >= kTileK)) continue;
#pragma unroll
      for (int i = 0; i < D::kRunLength; ++i) tile[c + i][r] = slice_value<D>(slice, run, i);
    }
  }
}

// Columns [k0, k0 + kTileK) of tokens [token0, token0 + kTileTokens) of x; zeros outside.
__device__ void load_x_tile(const float* x, int n_tokens, int cols, int token0, int k0, XTile& tile) {
  for (int e = threadIdx.x; e < kTileTokens * kTileK; e += kThreads) {
    const int t = e / kTileK, c = e % kTileK;
    const bool inside = token0 + t < n_tokens && k0 + c < cols;
    tile[c][t] = inside ? x[static_cast<std::size_t>(token0 + t) * cols + k0 + c] : 0.0f;
  }
}

template <class D>
__global__ void __launch_bounds__(kThreads)
    gemm_tiled_kernel(const std::uint8_t* w, std::size_t row_bytes, int rows, int cols, int decoded_cols, const float* x,
                      int n_tokens, float* out) {
  alignas(16) __shared__ XTile x_tile;
  alignas(16) __shared__ WTile w_tile;
  const int row0 = blockIdx.x * kTileRows, token0 = blockIdx.y * kTileTokens;
  const int my_rows = threadIdx.x % kThreadsPerToken * kMicro, my_tokens = threadIdx.x / kThreadsPerToken * kMicro;
  float acc[kMicro][kMicro] = {};
  for (int k0 = 0; k0 < cols; k0 += kTileK) {
    __syncthreads();  // the previous tiles are no longer read
    load_x_tile(x, n_tokens, cols, token0, k0, x_tile);
    load_w_tile<D>(w, row_bytes, rows, cols, decoded_cols, row0, k0, w_tile);
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kTileK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&x_tile[k][my_tokens]);
      const float4 b = *reinterpret_cast<const float4*>(&w_tile[k][my_rows]);
      const float av[kMicro] = {a.x, a.y, a.z, a.w}, bv[kMicro] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < kMicro; ++i) {
#pragma unroll
        for (int j = 0; j < kMicro; ++j) acc[i][j] += av[i] * bv[j];
      }
    }
  }
  for (int i = 0; i < kMicro && token0 + my_tokens + i < n_tokens; ++i) {
    float* out_row = out + static_cast<std::size_t>(token0 + my_tokens + i) * rows;
    for (int j = 0; j < kMicro; ++j) {
      if (row0 + my_rows + j < rows) out_row[row0 + my_rows + j] = acc[i][j];
    }
  }
}

}  // namespace

void launch_gemm_tiled(const WeightMatrix& w, const float* x, int n_tokens, float* out, const DeviceContext& ctx) {
  require(w.rows > 0 && w.cols > 0 && w.rows <= (1u << 30) && w.cols <= (1u << 30), "launch_gemm_tiled",
          "weight shape is empty or too large");
  require(n_tokens >= 0 && n_tokens / kTileTokens < 65535, "launch_gemm_tiled", "token count out of range");
  if (n_tokens == 0) return;
  with_decoder(w.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
    const int decoded_cols = decodable_slices<D>(w.data, cols, "launch_gemm_tiled") / D::kSlicesPerBlock * D::kBlockElems;
    const dim3 grid((rows + kTileRows - 1) / kTileRows, (n_tokens + kTileTokens - 1) / kTileTokens);
    launch_kernel(gemm_tiled_kernel<D>, grid, kThreads, 0, ctx.stream(), static_cast<const std::uint8_t*>(w.data),
                                                        row_bytes(w.dtype, w.cols), rows, cols, decoded_cols, x,
                                                        n_tokens, out);
    RF_GPU_CHECK_LAUNCH();
  });
}

}  // namespace rf::gpu
