// The GEMM of a decode batch (up to 64 tokens) with quantized weights on NVIDIA's integer tensor cores
// (mma.sync m16n8k16 s8, sm_80+), as llama.cpp's MMQ does: x's int8 copy in blocks of 32 (made by
// the kernel that makes x, as for the one-token GEMV), each weight unit's codes (dequantize.cuh: 32
// columns, the unit the GEMV's integer path reads) from their device layout straight into A
// fragments, and each unit's int32 products scaled into fp32 sums. Without it a decode batch decoded
// every weight to f16 for cuBLAS, step after step (docs/perf_history.md, issue #25).
//
// A block takes kRowTiles tiles of 16 rows and all the tokens; its 8 warps split into a group per row
// tile, whose warps take the row's units in runs. x's codes, scales and sums go through shared memory
// a chunk of units at a time, by cp.async, the next chunk's copies in flight while this chunk's are
// used; the weights load a warp's run of up to kAhead units at a time, each run's loads in flight while
// the run before it is multiplied (reading x from L2 for every use made the kernel latency-bound:
// docs/perf_history.md, issue #25).
// Lane t of a row's 4 lanes holds its row's whole unit (one load of the decoder's), and gives the mma
// the 4 columns 4t.. of each 16-column half. A group's sums meet in shared memory in a fixed order.
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/common/tensor_core.cuh"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/quant/dequantize.cuh"

namespace rf::gpu {

namespace {

#if defined(ROCMFORGE_GPU_CUDA)

constexpr int kWarps = 8;
constexpr int kLanes = kMmaLanes;
constexpr int kThreads = kWarps * kLanes;
constexpr int kTileRows = kMmaRows, kTileTokens = kMmaCols;
constexpr int kAhead = 4;  // units a warp loads before it uses any

// A chunk of x in shared memory: kUnits units of each of kTokens tokens (about 20 KiB whatever the
// token count). A token's 32 codes are two 16-byte halves, swapped for tokens 4..7 of every 8, so that
// the 8 tokens an mma reads at once fall in distinct banks.
template <int kTokenTiles>
struct XChunk {
  static constexpr int kTokens = kTokenTiles * kTileTokens, kUnits = 64 / kTokenTiles;
  alignas(16) std::int8_t codes[kUnits][kTokens][kRoundedBlockCols];
  float scales[kUnits][kTokens];
  std::int32_t sums[kUnits][kTokens];

  __device__ static int half_at(int token, int half) { return half ^ ((token >> 2) & 1); }

  // Copies units [first, first + kUnits) of x (zeros past row_units; tokens past n_tokens repeat the last).
  template <bool kSums>
  __device__ void load(const QuantizedActivations& x, int first, int row_units, int cols, int n_tokens) {
    for (int i = threadIdx.x; i < kUnits * kTokens * 2; i += kThreads) {
      const int u = i / (2 * kTokens), token = i / 2 % kTokens, half = i % 2, unit = first + u;
      const bool valid = unit < row_units;
      const std::int8_t* src = x.codes + static_cast<std::size_t>(min(token, n_tokens - 1)) * cols +
                               static_cast<std::size_t>(valid ? unit : 0) * kRoundedBlockCols + 16 * half;
      copy_async(&codes[u][token][16 * half_at(token, half)], src, valid);
    }
    for (int i = threadIdx.x; i < kUnits * kTokens; i += kThreads) {
      const int u = i / kTokens, token = i % kTokens, unit = first + u;
      const bool valid = unit < row_units;
      const std::size_t at = static_cast<std::size_t>(min(token, n_tokens - 1)) * row_units + (valid ? unit : 0);
      copy_async_word(&scales[u][token], x.scales + at, valid);
      if constexpr (kSums) copy_async_word(&sums[u][token], x.code_sums + at, valid);
    }
    commit_copies();
  }
};

template <class D, int kTokenTiles, int kRowTiles>
__global__ void __launch_bounds__(kThreads)
    quantized_few_tokens_kernel(const std::uint8_t* w, std::size_t row_bytes, int rows, int cols, QuantizedActivations x,
                                int n_tokens, float* out) {
#if __CUDA_ARCH__ >= 800
  using Chunk = XChunk<kTokenTiles>;
  constexpr int kValues = kTokenTiles * 4;
  constexpr int kGroupWarps = kWarps / kRowTiles;  // warps of a row tile
  constexpr int kRun = Chunk::kUnits / kGroupWarps;  // a warp's units of a chunk
  static_assert(kRun >= 1 && Chunk::kUnits % kGroupWarps == 0, "every warp takes units of every chunk");
  static_assert(sizeof(float) * kWarps / 2 * kValues * kLanes <= 2 * sizeof(Chunk), "the sums fit the chunks' memory");
  __shared__ Chunk chunks[2];
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int g = lane / 4, t = lane % 4, member = warp % kGroupWarps;
  const int row_units = cols / kRoundedBlockCols;
  const int first_row = (blockIdx.x * kRowTiles + warp / kGroupWarps) * kTileRows;
  // This lane's rows g and g + 8 (A's rows, C's rows); a last block's rows past the end are read, never
  // written.
  const std::uint8_t* row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) row[r] = w + static_cast<std::size_t>(min(first_row + g + 8 * r, rows - 1)) * row_bytes;
  float acc[kTokenTiles][4] = {};

  // A run: kLoad of this warp's units, whose codes load together. A run's codes are in flight while
  // the run before it is multiplied.
  constexpr int kLoad = kRun < kAhead ? kRun : kAhead;
  constexpr int kRunsPerChunk = kRun / kLoad;
  using RunCodes = typename D::Codes[kLoad][2];
  auto first_unit = [&](int chunk, int run) { return chunk * Chunk::kUnits + member * kRun + run * kLoad; };
  auto load_codes = [&](int first, RunCodes& codes) {
#pragma unroll
    for (int a = 0; a < kLoad; ++a) {
      if (first + a < row_units) {
#pragma unroll
        for (int r = 0; r < 2; ++r) D::load_codes(row[r], row_units, first + a, codes[a][r]);
      }
    }
  };
  // A unit of the row (its codes, both rows) against x's copy of it (chunk unit u).
  auto multiply = [&](const Chunk& chunk, int u, const typename D::Codes (&unit)[2]) {
    int a_frag[2][2];  // [half][row g, g + 8]
    float scale[2][2], offset[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        a_frag[h][r] = D::unit_word(unit[r], h, t);
        scale[r][h] = D::unit_scale(unit[r], h);
      }
      offset[r] = D::unit_offset(unit[r]);
    }
#pragma unroll
    for (int n = 0; n < kTokenTiles; ++n) {
      // B's column g is token 8n + g; C's columns 2t and 2t + 1 are tokens 8n + 2t + j.
      const int b_token = kTileTokens * n + g;
      int c[2][4] = {};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int x_word = *reinterpret_cast<const int*>(&chunk.codes[u][b_token][16 * Chunk::half_at(b_token, h) + 4 * t]);
        mma_s8(c[h], a_frag[h][0], a_frag[h][1], x_word);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int token = kTileTokens * n + 2 * t + j;
        const float x_scale = chunk.scales[u][token];
        const float x_sum = D::kUsesCodeSum ? static_cast<float>(chunk.sums[u][token]) : 0.0f;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int i = 2 * r + j;  // C's value at row g + 8r, token 2t + j
          float v = scale[r][0] * static_cast<float>(c[0][i]) + scale[r][1] * static_cast<float>(c[1][i]);
          if constexpr (D::kUsesCodeSum) v -= offset[r] * x_sum;
          acc[n][i] += x_scale * v;
        }
      }
    }
  };

  const int n_chunks = (row_units + Chunk::kUnits - 1) / Chunk::kUnits;
  RunCodes current, next;
  load_codes(first_unit(0, 0), current);  // the weights do not depend on the kernel before
  begin_dependent();                      // x is its output
  chunks[0].template load<D::kUsesCodeSum>(x, 0, row_units, cols, n_tokens);
  for (int c = 0; c < n_chunks; ++c) {
    if (c + 1 < n_chunks) {
      chunks[(c + 1) % 2].template load<D::kUsesCodeSum>(x, (c + 1) * Chunk::kUnits, row_units, cols, n_tokens);
      wait_copies<1>();
    } else {
      wait_copies<0>();
    }
    __syncthreads();  // chunk c is in shared memory
    const Chunk& chunk = chunks[c % 2];
#pragma unroll
    for (int run = 0; run < kRunsPerChunk; ++run) {
      const bool last = run + 1 == kRunsPerChunk;
      if (!last || c + 1 < n_chunks) load_codes(last ? first_unit(c + 1, 0) : first_unit(c, run + 1), next);
#pragma unroll
      for (int a = 0; a < kLoad; ++a) {
        if (first_unit(c, run) + a < row_units) multiply(chunk, member * kRun + run * kLoad + a, current[a]);
      }
#pragma unroll
      for (int a = 0; a < kLoad; ++a) current[a][0] = next[a][0], current[a][1] = next[a][1];
    }
    __syncthreads();  // chunk c's buffer may take chunk c + 2
  }
  sum_warp_groups_in_tree<kWarps, kGroupWarps, kLanes, kValues>(&acc[0][0], reinterpret_cast<float*>(chunks));
  if (member != 0) return;
#pragma unroll
  for (int n = 0; n < kTokenTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = first_row + g + 8 * (i / 2), token = kTileTokens * n + 2 * t + i % 2;
      if (r < rows && token < n_tokens) out[static_cast<std::size_t>(token) * rows + r] = acc[n][i];
    }
  }
#else
  __trap();  // never launched: quantized_few_tokens_available() checks the code's architecture first
#endif
}

template <class D, int kTokenTiles, int kRowTiles>
void launch_tiles(const WeightMatrix& w, QuantizedActivations x, int n_tokens, float* out, const DeviceContext& ctx) {
  constexpr int kRows = kRowTiles * kTileRows;
  const int blocks = static_cast<int>((w.rows + kRows - 1) / kRows);
  launch_dependent(quantized_few_tokens_kernel<D, kTokenTiles, kRowTiles>, dim3(blocks), dim3(kThreads), 0, ctx,
                   static_cast<const std::uint8_t*>(w.data), row_bytes(w.dtype, w.cols), static_cast<int>(w.rows),
                   static_cast<int>(w.cols), x, n_tokens, out);
}

// Row tiles a block: more where the matrix still makes two blocks an SM, each x chunk then serving more
// rows.
template <class D, int kTokenTiles>
void launch_token_tiles(const WeightMatrix& w, QuantizedActivations x, int n_tokens, float* out, const DeviceContext& ctx) {
  const long long tiles = static_cast<long long>((w.rows + kTileRows - 1) / kTileRows);
  const long long wanted_blocks = 2LL * ctx.attributes().multiprocessors;
  if (tiles >= 4 * wanted_blocks) return launch_tiles<D, kTokenTiles, 4>(w, x, n_tokens, out, ctx);
  if (tiles >= 2 * wanted_blocks) return launch_tiles<D, kTokenTiles, 2>(w, x, n_tokens, out, ctx);
  launch_tiles<D, kTokenTiles, 1>(w, x, n_tokens, out, ctx);
}

#endif

}  // namespace

#if defined(ROCMFORGE_GPU_CUDA)

bool quantized_few_tokens_available() {
  return built_for_tensor_cores(quantized_few_tokens_kernel<Decoder<DType::Q4_0>, 1, 1>);
}

void launch_gemm_quantized_few_tokens(const WeightMatrix& w, QuantizedActivations x, int n_tokens, float* out,
                                      const DeviceContext& ctx) {
  const char* name = "launch_gemm_quantized_few_tokens";
  require(gemv_reads_rounded(w.dtype), name, "weights of a type with integer codes (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
  require(n_tokens >= 1 && n_tokens <= kMostQuantizedFewTokens, name, "1 to 64 tokens");
  require(w.rows > 0 && w.rows <= (1u << 30) && w.cols <= (1u << 30), name, "weight shape is empty or too large");
  require(is_aligned(x.codes, 16), name, "x's codes must be 16-byte aligned");
  with_decoder(w.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    if constexpr (D::kIntegerDot) {
      decodable_slices<D>(w.data, static_cast<int>(w.cols), name);  // whole blocks, aligned
      switch ((n_tokens + kTileTokens - 1) / kTileTokens) {
        case 1: return launch_token_tiles<D, 1>(w, x, n_tokens, out, ctx);
        case 2: return launch_token_tiles<D, 2>(w, x, n_tokens, out, ctx);
        case 3:
        case 4: return launch_token_tiles<D, 4>(w, x, n_tokens, out, ctx);
        default: return launch_token_tiles<D, 8>(w, x, n_tokens, out, ctx);
      }
    }
  });
}

#else

bool quantized_few_tokens_available() { return false; }

void launch_gemm_quantized_few_tokens(const WeightMatrix&, QuantizedActivations, int, float*, const DeviceContext&) {
  fail("launch_gemm_quantized_few_tokens: no tensor-core kernel in a HIP build");
}

#endif

}  // namespace rf::gpu
