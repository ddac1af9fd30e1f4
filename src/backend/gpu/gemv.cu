// Decode GEMV, y = W x for one vector, W in any stored type decoded in registers.
#include "backend/gpu/block_decode.cuh"
#include "backend/gpu/launch_check.h"
#include "backend/gpu/ops.h"
#include "backend/gpu/reduce.cuh"

namespace rf::gpu {

namespace {

// A row is read by a team of kMaxWarpSize lanes: one wavefront on CDNA, two warps on NVIDIA and RDNA
// (their partial sums meet in shared memory). Fixing the team in threads, not warps, keeps the grid
// the same on every target.
constexpr int kRowLanes = kMaxWarpSize;
constexpr int kRowsPerBlock = 4;
constexpr int kThreads = kRowLanes * kRowsPerBlock;
// x goes through shared memory a chunk at a time: read from global memory once per block instead of
// once per row (a quarter of its L2 traffic), and with no alignment asked of the caller's x. A
// multiple of every type's block.
constexpr int kChunkCols = 4096;

// sum over a run of q[i] * x[i] (and of x[i], for the bias), x read 16 bytes at a time.
template <int kLength>
__device__ __forceinline__ void run_dot(const float (&q)[kLength], const float* x, float& dot, float& x_sum) {
  static_assert(kLength % 4 == 0);
  const auto* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int j = 0; j < kLength / 4; ++j) {
    const float4 xv = x4[j];
    dot += q[4 * j] * xv.x + q[4 * j + 1] * xv.y + q[4 * j + 2] * xv.z + q[4 * j + 3] * xv.w;
    x_sum += (xv.x + xv.y) + (xv.z + xv.w);
  }
}

// Rows past `rows` (the last block's spare teams) still stage x and reduce, with nothing to add, so
// that every thread reaches every barrier.
template <class D>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const std::uint8_t* w, std::size_t row_bytes, int rows, int cols, int slices, const float* x, float* y) {
  __shared__ float4 x_chunk4[kChunkCols / 4];
  float* x_chunk = reinterpret_cast<float*>(x_chunk4);
  constexpr int kSlicesPerChunk = kChunkCols / D::kBlockElems * D::kSlicesPerBlock;
  const int lane = threadIdx.x % kRowLanes;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kRowLanes;
  const bool active = row < rows;
  const std::uint8_t* w_row = w + static_cast<std::size_t>(active ? row : 0) * row_bytes;
  const int decoded_cols = slices / D::kSlicesPerBlock * D::kBlockElems;  // plain types read the rest by value()
  float acc = 0.0f;
  for (int chunk = 0; chunk * kChunkCols < cols; ++chunk) {
    const int first_col = chunk * kChunkCols;
    const int chunk_cols = min(kChunkCols, cols - first_col);
    __syncthreads();  // the previous chunk is no longer read
    for (int i = threadIdx.x; i < chunk_cols; i += kThreads) x_chunk[i] = x[first_col + i];
    __syncthreads();
    if (!active) continue;
    const int end = min(slices, (chunk + 1) * kSlicesPerChunk);
#pragma unroll 2
    for (int s = chunk * kSlicesPerChunk + lane; s < end; s += kRowLanes) {
      typename D::Slice slice;
      D::decode(w_row, s, slice);
#pragma unroll
      for (int r = 0; r < D::kRuns; ++r) {
        float dot = 0.0f, x_sum = 0.0f;
        run_dot(slice.q[r], x_chunk + (slice.column[r] - first_col), dot, x_sum);
        acc += slice.scale[r] * dot;
        if constexpr (D::kHasBias) acc += slice.bias[r] * x_sum;
      }
    }
    if constexpr (D::kPlain) {
      for (int c = max(decoded_cols, first_col) + lane; c < first_col + chunk_cols; c += kRowLanes) {
        acc += D::value(w_row, c) * x_chunk[c - first_col];
      }
    }
  }
  acc = group_reduce<kRowLanes, kThreads>(acc, SumOp{});
  if (active && lane == 0) y[row] = acc;
}

}  // namespace

void launch_gemv(const WeightMatrix& w, const float* x, float* y, gpuStream_t stream) {
  require(w.rows > 0 && w.cols > 0 && w.rows <= (1u << 30) && w.cols <= (1u << 30), "launch_gemv",
          "weight shape is empty or too large");
  with_decoder(w.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
    const int slices = decodable_slices<D>(w.data, cols, "launch_gemv");
    const int blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    gemv_kernel<D><<<blocks, kThreads, 0, stream>>>(static_cast<const std::uint8_t*>(w.data), row_bytes(w.dtype, w.cols),
                                                   rows, cols, slices, x, y);
    RF_GPU_CHECK_LAUNCH();
  });
}

}  // namespace rf::gpu
