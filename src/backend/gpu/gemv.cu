// Decode GEMV, y = W x for one vector, W in any stored type decoded in registers; several products
// of the same x in one launch (a layer's q, k and v), or the FFN's gate and up with SwiGLU fused.
//
// Decode is a stream of weight bytes, so the kernel is built to keep many loads in flight: a block
// of kThreads threads owns a few rows (of each matrix it multiplies), and each thread walks
// the columns a slice (16 bytes of weights) at a time, loading that slice of all its rows before
// using any. x is read once per slice and serves every row; it comes from L1, not shared memory,
// so blocks need no barrier until their final reduction.
#include <algorithm>
#include <span>
#include <type_traits>

#include "backend/gpu/activation.cuh"
#include "backend/gpu/block_decode.cuh"
#include "backend/gpu/dependent_launch.cuh"
#include "backend/gpu/launch_check.h"
#include "backend/gpu/ops.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxSegments = 3;

// Rows per block. A thread of a 4096-column row has 4 slices of 16 bytes to load per row in a 16-bit
// type (8 columns a slice) but 1 in Q4_0 (32 columns), so Q4_0 takes 8 rows (alone, not with gate and
// up, where 16 would need 168 registers): llama3-8b q4_0 decode went from 237 to 266 tok/s on an
// H100. The other quantized types lost with 8 (Q8_0 down 27.9 -> 33.8 us, Q4_K 38 -> 58 us), and so
// did Q4_0's 14336-column down projection with 4 (24.3 -> 28.3 us).
template <class D, int kMats>
inline constexpr int kRowsPerBlock = std::is_same_v<D, Decoder<DType::Q4_0>> && kMats == 1 ? 8 : 4;

// Rows [0, rows) of one product go to the blocks from first_block on, kRowsPerBlock rows each.
// With two matrices (gate, up), each output is swiglu(w[0] row . x, w[1] row . x).
struct Segment {
  const std::uint8_t* w[2];
  float* y;
  int rows;
  int first_block;
};

struct GemvArgs {
  Segment segments[kMaxSegments];
  int n_segments;
  std::size_t row_bytes;
  int cols;
  int slices;  // per row, decoded by D::decode; plain types read columns past them by D::value
  const float* x;
};

template <int kLength>
__device__ __forceinline__ void load_x(const float* x, float (&out)[kLength]) {
  static_assert(kLength % 4 == 0);
  const auto* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int j = 0; j < kLength / 4; ++j) {
    const float4 v = x4[j];
    out[4 * j] = v.x, out[4 * j + 1] = v.y, out[4 * j + 2] = v.z, out[4 * j + 3] = v.w;
  }
}

template <class D, int kMats>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const GemvArgs args) {
  // The block's segment, by constant indices only: a computed index would copy args to local memory.
  Segment seg = args.segments[0];
#pragma unroll
  for (int i = 1; i < kMaxSegments; ++i) {
    if (i < args.n_segments && static_cast<int>(blockIdx.x) >= args.segments[i].first_block) seg = args.segments[i];
  }
  constexpr int kRows = kRowsPerBlock<D, kMats>;
  constexpr int kUnroll = 2;  // iterations whose loads are in flight at once per thread
  const int row0 = (static_cast<int>(blockIdx.x) - seg.first_block) * kRows;
  const int row_blocks = args.cols / D::kBlockElems;
  // A block's spare rows past the end re-read the last row; their sums are dropped.
  const std::uint8_t* rows[kMats][kRows];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) rows[m][r] = seg.w[m] + static_cast<std::size_t>(min(row0 + r, seg.rows - 1)) * args.row_bytes;
  }
  begin_dependent();
  float acc[kMats][kRows] = {};
#pragma unroll kUnroll
  for (int s = threadIdx.x; s < args.slices; s += kThreads) {
    typename D::Slice slice[kMats][kRows];
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) D::decode(rows[m][r], row_blocks, s, slice[m][r]);
    }
#pragma unroll
    for (int run = 0; run < D::kRuns; ++run) {
      float xs[D::kRunLength];
      load_x(args.x + slice[0][0].column[run], xs);  // a run's columns are the same in every row
      float x_sum = 0.0f;
      if constexpr (D::kHasBias) {
#pragma unroll
        for (int i = 0; i < D::kRunLength; ++i) x_sum += xs[i];
      }
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float dot = 0.0f;
#pragma unroll
          for (int i = 0; i < D::kRunLength; ++i) dot += slice[m][r].q[run][i] * xs[i];
          acc[m][r] += slice[m][r].scale[run] * dot;
          if constexpr (D::kHasBias) acc[m][r] += slice[m][r].bias[run] * x_sum;
        }
      }
    }
  }
  if constexpr (D::kPlain) {
    for (int c = args.slices * D::kRunLength + threadIdx.x; c < args.cols; c += kThreads) {
      const float xc = args.x[c];
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[m][r] += D::value(rows[m][r], c) * xc;
      }
    }
  }

  // Sums within each warp, then across the block's warps through shared memory.
  constexpr int kWarps = kThreads / RF_WARP_SIZE;
  __shared__ float partial[kWarps][kMats][kRows];
  const int lane = static_cast<int>(threadIdx.x) % RF_WARP_SIZE, warp = static_cast<int>(threadIdx.x) / RF_WARP_SIZE;
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float v = acc[m][r];
      for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) v += shuffle_xor(v, mask);
      if (lane == 0) partial[warp][m][r] = v;
    }
  }
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x);
  if (r >= kRows || row0 + r >= seg.rows) return;
  float sums[kMats];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
    sums[m] = 0.0f;
    for (int w = 0; w < kWarps; ++w) sums[m] += partial[w][m][r];
  }
  if constexpr (kMats == 2) {
    seg.y[row0 + r] = swiglu(sums[0], sums[1]);
  } else {
    seg.y[row0 + r] = sums[0];
  }
}

// One output vector: its matrix (two, gate and up, for the SwiGLU launch).
struct Product {
  const WeightMatrix* w[2];
  float* y;
};

// Checks the products against each other and x, and launches one kernel for all of them.
template <int kMats>
void launch_products(std::span<const Product> products, const float* x, gpuStream_t stream, const char* name) {
  require(!products.empty() && products.size() <= kMaxSegments, name, "between 1 and 3 products per launch");
  const WeightMatrix& first = *products[0].w[0];
  require(first.rows > 0 && first.cols > 0 && first.cols <= (1u << 30), name, "weight shape is empty or too large");
  require(is_aligned(x, 16), name, "x must be 16-byte aligned");
  GemvArgs args{};
  args.n_segments = static_cast<int>(products.size());
  args.row_bytes = row_bytes(first.dtype, first.cols);
  args.cols = static_cast<int>(first.cols);
  args.x = x;
  for (std::size_t i = 0; i < products.size(); ++i) {
    Segment& seg = args.segments[i];
    for (int m = 0; m < kMats; ++m) {
      const WeightMatrix& w = *products[i].w[m];
      require(w.dtype == first.dtype && w.cols == first.cols, name, "products of one launch must share type and columns");
      require(w.rows == products[i].w[0]->rows && w.rows > 0 && w.rows <= (1u << 30), name, "bad row count");
      seg.w[m] = static_cast<const std::uint8_t*>(w.data);
    }
    seg.y = products[i].y;
    seg.rows = static_cast<int>(products[i].w[0]->rows);
  }
  with_decoder(first.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    int blocks = 0;
    for (int i = 0; i < args.n_segments; ++i) {
      args.segments[i].first_block = blocks;
      blocks += (args.segments[i].rows + kRowsPerBlock<D, kMats> - 1) / kRowsPerBlock<D, kMats>;
    }
    args.slices = args.cols;
    for (std::size_t i = 0; i < products.size(); ++i) {
      for (int m = 0; m < kMats; ++m) args.slices = std::min(args.slices, decodable_slices<D>(args.segments[i].w[m], args.cols, name));
    }
    launch_dependent(gemv_kernel<D, kMats>, blocks, kThreads, 0, stream, args);
  });
}

}  // namespace

void launch_gemv(const WeightMatrix& w, const float* x, float* y, gpuStream_t stream) {
  const Product product{{&w, nullptr}, y};
  launch_products<1>(std::span(&product, 1), x, stream, "launch_gemv");
}

void launch_gemv_group(std::span<const WeightProduct> group, const float* x, gpuStream_t stream) {
  Product products[kMaxSegments];
  require(group.size() <= kMaxSegments, "launch_gemv_group", "at most 3 products per launch");
  for (std::size_t i = 0; i < group.size(); ++i) products[i] = {{&group[i].w, nullptr}, group[i].out};
  launch_products<1>(std::span(products, group.size()), x, stream, "launch_gemv_group");
}

void launch_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const float* x, float* out, gpuStream_t stream) {
  const Product product{{&gate, &up}, out};
  launch_products<2>(std::span(&product, 1), x, stream, "launch_gemv_swiglu");
}

}  // namespace rf::gpu
