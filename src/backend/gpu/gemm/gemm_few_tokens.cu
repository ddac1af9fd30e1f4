// The GEMM of a decode batch (up to 32 tokens) with 16-bit weights on NVIDIA's tensor cores (mma.sync
// m16n8k16, sm_80+): a memory stream like the one-token GEMV, where cuBLAS's tiles at these shapes
// leave SMs idle (Llama 3 8B's q/k/v: docs/perf_history.md, v14) and never overlap the kernel before.
//
// A block takes 32 or 48 whole rows (the mma's M; the tokens are its N) and streams them, with the
// tokens' x, through a ring of 4 shared-memory stages of 256 columns by cp.async: up to 180 KiB in
// flight a SM, which registers could not hold. Each of its 8 warps takes a 32-column chunk of a
// stage. Lane t of a row's 4 lanes reads 16 bytes, columns 8t..8t+7, of the row and of each token's x:
// a dot product does not care in which order its columns come, so those 8 columns serve as the lane's
// fragment columns {2t, 2t+1, 2t+8, 2t+9} of two k-steps, and no ldmatrix or shuffle is needed. The
// warps' sums meet in shared memory, always in the same order. The first stages' weights load before
// the wait for the kernel before (dependent_launch.cuh).
#include <algorithm>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/common/tensor_core.cuh"
#include "util/error.h"

namespace rf::gpu {

namespace {

#if defined(ROCMFORGE_GPU_CUDA)

constexpr int kWarps = 8;
constexpr int kLanes = kMmaLanes;
constexpr int kThreads = kWarps * kLanes;
constexpr int kChunkCols = 32;  // 16 bytes a lane over 4 lanes, two k-steps of 16
constexpr int kTileRows = kMmaRows, kTileTokens = kMmaCols;

// A stage of the ring: a block's rows and the tokens over kStageCols columns, each warp a chunk of it.
constexpr int kStageCols = kWarps * kChunkCols;
static_assert(kStageCols == kFewTokensColumnMultiple);
constexpr int kStageRowVectors = kStageCols / 8;
// Rows 64 bytes off a multiple of 128, so that the two rows a quarter-warp reads fall in distinct banks.
constexpr int kPitch = kStageRowVectors + 4;

// Steps in flight: 4 of up to 45 KiB (48 rows and 32 tokens) a block, one block a SM.
constexpr int kStages = 4;
// Rows of a block, in tiles of 16: 2 or 3, the fewest whose blocks fit one wave (fewer rows a block read
// x more often than the weights; q/k/v in 96 blocks of 4 tiles lost to 128 blocks of 3; measured:
// docs/perf_history.md, v16).
constexpr int kMinRowTiles = 2, kMostRowTiles = 3;

constexpr int token_tiles(int n_tokens) { return (n_tokens + kTileTokens - 1) / kTileTokens; }

__host__ __device__ constexpr int stage_vectors(int row_tiles, int token_tiles) {
  return (row_tiles * kTileRows + token_tiles * kTileTokens) * kPitch;
}

// A block's shared memory: the ring; at the end, it holds the warps' sums (half the warps' at a time).
// 92 KiB (32 rows, 8 tokens) to 180 KiB (48 rows, 32 tokens): not every GPU has that much (few_tokens_fits).
__host__ __device__ constexpr std::size_t shared_bytes(int row_tiles, int token_tiles) {
  return std::size_t{kStages} * stage_vectors(row_tiles, token_tiles) * sizeof(uint4);
}

// out[t][r] for the kRowTiles * 16 rows of block blockIdx.x; w rows x cols and x n_tokens x cols
// row-major, as 16-byte vectors.
template <int kRowTiles, int kTokenTiles, bool kBf16>
__global__ void __launch_bounds__(kThreads, 1)
    few_tokens_kernel(const uint4* w, const uint4* x, int rows, int cols, int n_tokens, float* out) {
#if __CUDA_ARCH__ >= 800
  constexpr int kBlockRows = kRowTiles * kTileRows, kTokens = kTokenTiles * kTileTokens;
  constexpr int kStride = stage_vectors(kRowTiles, kTokenTiles);
  constexpr int kValues = kRowTiles * kTokenTiles * 4;
  static_assert(kWarps / 2 * kValues * kLanes * sizeof(float) <= shared_bytes(kRowTiles, kTokenTiles));
  extern __shared__ uint4 ring[];
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int g = lane / 4, t = lane % 4;
  const int row_vectors = cols / 8;
  const int steps = cols / kStageCols;
  const int first_row = blockIdx.x * kBlockRows;
  auto load_w = [&](int step) {
    uint4* slot = ring + (step % kStages) * kStride;
    for (int v = threadIdx.x; v < kBlockRows * kStageRowVectors; v += kThreads) {
      const int r = v / kStageRowVectors, c = v % kStageRowVectors;
      const int row = min(first_row + r, rows - 1);  // a last block's rows past the end: read, never written
      copy_async(slot + r * kPitch + c, w + static_cast<std::size_t>(row) * row_vectors + step * kStageRowVectors + c,
                 true);
    }
  };
  auto load_x = [&](int step) {
    uint4* slot = ring + (step % kStages) * kStride + kBlockRows * kPitch;
    for (int v = threadIdx.x; v < kTokens * kStageRowVectors; v += kThreads) {
      const int token = v / kStageRowVectors, c = v % kStageRowVectors;
      const bool valid = token < n_tokens;
      copy_async(slot + token * kPitch + c,
                 x + static_cast<std::size_t>(valid ? token : 0) * row_vectors + step * kStageRowVectors + c, valid);
    }
  };
  // The first kStages - 1 steps: their weights in one group (before the wait for the kernel before,
  // whose output x is), then each step's x in a group of its own, so that step s waits for the first
  // s + 2 groups alike.
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_w(s);
  }
  commit_copies();
  begin_dependent();
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load_x(s);
    commit_copies();
  }
  float acc[kRowTiles][kTokenTiles][4] = {};
  for (int step = 0; step < steps; ++step) {
    wait_copies<kStages - 2>();
    __syncthreads();  // the step is in for every thread, and the slot loaded next is free
    const int next = step + kStages - 1;
    if (next < steps) {
      load_w(next);
      load_x(next);
    }
    commit_copies();
    const uint4* slot = ring + (step % kStages) * kStride + warp * (kChunkCols / 8) + t;
    uint4 a[kRowTiles][2], b[kTokenTiles];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
      a[m][0] = slot[(m * kTileRows + g) * kPitch];
      a[m][1] = slot[(m * kTileRows + g + 8) * kPitch];
    }
#pragma unroll
    for (int n = 0; n < kTokenTiles; ++n) b[n] = slot[(kBlockRows + n * kTileTokens + g) * kPitch];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
      for (int n = 0; n < kTokenTiles; ++n) {
        mma<kBf16>(acc[m][n], a[m][0].x, a[m][1].x, a[m][0].y, a[m][1].y, b[n].x, b[n].y);
        mma<kBf16>(acc[m][n], a[m][0].z, a[m][1].z, a[m][0].w, a[m][1].w, b[n].z, b[n].w);
      }
    }
  }
  wait_copies<0>();
  __syncthreads();  // the ring is free: it holds the warps' sums now
  sum_warps_in_tree<kWarps, kLanes, kValues>(&acc[0][0][0], reinterpret_cast<float*>(ring));
  if (warp != 0) return;
  // C fragment: c0, c1 at row g, tokens 2t and 2t + 1; c2, c3 at row g + 8.
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int n = 0; n < kTokenTiles; ++n) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = first_row + m * kTileRows + g + 8 * (c / 2);
        const int token = n * kTileTokens + 2 * t + c % 2;
        if (row < rows && token < n_tokens) out[static_cast<std::size_t>(token) * rows + row] = acc[m][n][c];
      }
    }
  }
#else
  __trap();  // never launched: few_tokens_gemm_available() checks the code's architecture first
#endif
}

template <int kRowTiles, int kTokenTiles, bool kBf16>
void launch_tiles(const WeightMatrix& w, const std::uint16_t* x16, int n_tokens, float* out, const DeviceContext& ctx) {
  constexpr auto kernel = few_tokens_kernel<kRowTiles, kTokenTiles, kBf16>;
  constexpr std::size_t shared = shared_bytes(kRowTiles, kTokenTiles);
  // Past 48 KiB of shared memory a kernel must ask, once on each device.
  ctx.memo({reinterpret_cast<const void*>(kernel), 0, 0, 0}, [&] {
    RF_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    return 1;
  });
  const int blocks = static_cast<int>((w.rows + kRowTiles * kTileRows - 1) / (kRowTiles * kTileRows));
  launch_dependent(kernel, dim3(blocks), dim3(kThreads), shared, ctx,
                   static_cast<const uint4*>(w.data), reinterpret_cast<const uint4*>(x16), static_cast<int>(w.rows),
                   static_cast<int>(w.cols), n_tokens, out);
}

template <int kRowTiles>
void launch_rows(const WeightMatrix& w, const std::uint16_t* x16, int n_tokens, float* out, const DeviceContext& ctx) {
  auto go = [&]<int kTokenTiles>() {
    if (w.dtype == DType::BF16) return launch_tiles<kRowTiles, kTokenTiles, true>(w, x16, n_tokens, out, ctx);
    launch_tiles<kRowTiles, kTokenTiles, false>(w, x16, n_tokens, out, ctx);
  };
  switch (token_tiles(n_tokens)) {
    case 1: return go.template operator()<1>();
    case 2: return go.template operator()<2>();
    case 3: return go.template operator()<3>();
    default: return go.template operator()<4>();
  }
}

#endif

}  // namespace

#if defined(ROCMFORGE_GPU_CUDA)

bool few_tokens_gemm_available() {
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, few_tokens_kernel<kMinRowTiles, 1, true>) != cudaSuccess) {
    (void)cudaGetLastError();  // no code for this device
    return false;
  }
  return attributes.ptxVersion >= 80;
}

bool few_tokens_fits(const DeviceContext& ctx, int row_tiles, int n_tokens) {
  const std::size_t limit = ctx.attributes().shared_per_block;
  return row_tiles >= kMinRowTiles && row_tiles <= kMostRowTiles && n_tokens >= 1 && n_tokens <= kMostFewTokens &&
         shared_bytes(row_tiles, token_tiles(n_tokens)) <= limit;
}

int few_tokens_row_tiles(const DeviceContext& ctx, std::size_t rows, int n_tokens) {
  const std::size_t sms = ctx.attributes().multiprocessors;
  for (std::size_t tiles = kMinRowTiles; tiles <= kMostRowTiles; ++tiles) {
    const std::size_t blocks = (rows + tiles * kTileRows - 1) / (tiles * kTileRows);
    if (blocks > sms) continue;
    // A block streams only so fast, and past 8 tokens reads more of x than of weights: fewer blocks
    // than 3/4 of the SMs lost to cuBLAS at 32 tokens (Llama 3.2 1B's o and down in 64 blocks, Qwen3
    // 8B's k and v in 32 each), where at 8 tokens the same shapes gained (measured: docs/perf_history.md,
    // v16, and a block's rate in "Figures moved out of code comments").
    if (n_tokens > kTileTokens && 4 * blocks < 3 * sms) return 0;
    return few_tokens_fits(ctx, static_cast<int>(tiles), n_tokens) ? static_cast<int>(tiles) : 0;
  }
  return 0;
}

void launch_gemm_few_tokens(const WeightMatrix& w, const std::uint16_t* x16, int n_tokens, float* out,
                            const DeviceContext& ctx, int row_tiles) {
  require(w.dtype == DType::BF16 || w.dtype == DType::F16, "launch_gemm_few_tokens", "16-bit weights only");
  require(n_tokens >= 1 && n_tokens <= kMostFewTokens, "launch_gemm_few_tokens", "1 to 32 tokens");
  require(w.cols % kStageCols == 0 && w.rows > 0 && w.cols <= (1u << 30) && w.rows <= (1u << 30),
          "launch_gemm_few_tokens", "columns must be a multiple of 256");
  require(reinterpret_cast<std::uintptr_t>(w.data) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x16) % 16 == 0,
          "launch_gemm_few_tokens", "W and x must be 16-byte aligned");
  if (row_tiles < kMinRowTiles || row_tiles > kMostRowTiles) {
    fail("launch_gemm_few_tokens: {} row tiles a block, where it takes {} to {}", row_tiles, kMinRowTiles,
         kMostRowTiles);
  }
  require(few_tokens_fits(ctx, row_tiles, n_tokens), "launch_gemm_few_tokens",
          "blocks of these rows and tokens need more shared memory than the device has");
  if (row_tiles == 2) return launch_rows<2>(w, x16, n_tokens, out, ctx);
  launch_rows<3>(w, x16, n_tokens, out, ctx);
}

#else

bool few_tokens_gemm_available() { return false; }

bool few_tokens_fits(const DeviceContext&, int, int) { return false; }

int few_tokens_row_tiles(const DeviceContext&, std::size_t, int) { return 0; }

void launch_gemm_few_tokens(const WeightMatrix&, const std::uint16_t*, int, float*, const DeviceContext&, int) {
  fail("launch_gemm_few_tokens: no tensor-core kernel in a HIP build");
}

#endif

}  // namespace rf::gpu
