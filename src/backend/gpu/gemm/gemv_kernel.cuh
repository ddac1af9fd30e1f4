#pragma once
// Decode GEMV, y = W x for a few vectors, W in any stored type decoded in registers; several products
// of the same x in one launch (a layer's q, k and v), or the FFN's gate and up with SwiGLU fused. A
// single token's product may also apply the RMSNorm of its input (RmsNormOf) or add itself into y.
//
// Decode is a stream of weight bytes, so the kernel is built to keep many loads in flight: a block
// of kThreads threads owns a few rows (of each matrix it multiplies), and each thread walks
// the columns a slice (16 bytes of weights) at a time, loading that slice of all its rows before
// using any. x is read once per slice and serves every row; it comes from L1, not shared memory,
// so blocks need no barrier until their final reduction.
//
// Quantized weights multiply x's int8 copy instead where the caller made one (kIntegerDot): a unit's
// quants go straight into dp4a with x's codes, with no decode to fp32, and x's reads from L1 shrink
// fourfold.
//
// A block multiplies its rows' slices with up to kTokens vectors (a batch's tokens), and each token's
// sums are formed in the same order whatever kTokens is, so a token's output bits never depend on the
// tokens beside it: batching leaves every answer as it is alone.
//
// A sparse layer's experts (launch_expert_gemv) run as one product per picked expert, the grid's y
// index its slot in the routing's list of picked experts, over that expert's entries as tokens.
//
// This file holds the kernels and launch_typed's definition; gemv_<types>.cu instantiate it per type.
#include <algorithm>
#include <type_traits>

#include "backend/gpu/common/constant_dispatch.h"
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/elementwise/activation.cuh"
#include "backend/gpu/gemm/gemv_launch.h"
#include "backend/gpu/quant/dequantize.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu::gemv_detail {

constexpr int kThreads = 128;
constexpr int kUnroll = 2;  // loop iterations whose loads are in flight at once per thread

// Rows per block. A thread of a 4096-column row has 4 slices of 16 bytes to load per row in a 16-bit
// type (8 columns a slice) but 1 in Q4_0 (32 columns), so Q4_0 takes 8 rows (alone, not with gate and
// up, where 16 would need 168 registers) to keep more loads in flight. The other quantized types lost
// with 8, and so did Q4_0's 14336-column down projection with 4 (measured: docs/perf_history.md, v3
// and "Figures moved out of code comments").
// With several tokens, the sums take the registers: 4 rows (2 with gate and up). The integer path for
// one token picks its own (launch_typed), measured at 8, 4, 2 and 1 rows (docs/perf_history.md, v5
// and "Figures moved out of code comments").
template <class D, int kMats, int kTokens>
inline constexpr int kRowsPerBlock =
    kTokens > 1 ? 4 / kMats : (std::is_same_v<D, Decoder<DType::Q4_0>> && kMats == 1 ? 8 : 4);

// Tokens per block: a launch for n tokens takes the fewest of these that holds them, and blocks of
// kMaxTokens for more.
constexpr int kMaxTokens = 8;

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

// f(m, r) for each row r of each matrix m of a block, unrolled: a slice's loads of all its rows are
// issued before any is used.
template <int kMats, int kRows, class F>
__device__ __forceinline__ void for_each_row(F&& f) {
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) f(m, r);
  }
}

// Adds each row's slices times each token's x to acc, decoding the weights to fp32. With kNorm (one
// token), x is multiplied by the norm's weight as it is read, and sum_sq gathers x's squares: a block
// meets every column once.
template <class D, int kMats, int kRows, int kTokens, bool kNorm>
__device__ __forceinline__ void accumulate_decoded(const GemvArgs& args, const std::uint8_t* const (&rows)[kMats][kRows],
                                                   const float* const (&x)[kTokens], float (&acc)[kMats][kRows][kTokens],
                                                   float& sum_sq) {
  static_assert(!kNorm || kTokens == 1);
  const int row_blocks = args.cols / D::kBlockElems;
#pragma unroll kUnroll
  for (int s = threadIdx.x; s < args.slices; s += kThreads) {
    typename D::Slice slice[kMats][kRows];
    for_each_row<kMats, kRows>([&](int m, int r) { D::decode(rows[m][r], row_blocks, s, slice[m][r]); });
#pragma unroll
    for (int run = 0; run < D::kRuns; ++run) {
#pragma unroll
      for (int k = 0; k < kTokens; ++k) {
        float xs[D::kRunLength];
        load_x(x[k] + slice[0][0].column[run], xs);  // a run's columns are the same in every row
        if constexpr (kNorm) {
          float weight[D::kRunLength];
          load_x(args.norm.weight + slice[0][0].column[run], weight);
#pragma unroll
          for (int i = 0; i < D::kRunLength; ++i) sum_sq += xs[i] * xs[i], xs[i] *= weight[i];
        }
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
            acc[m][r][k] += slice[m][r].scale[run] * dot;
            if constexpr (D::kHasBias) acc[m][r][k] += slice[m][r].bias[run] * x_sum;
          }
        }
      }
    }
  }
  if constexpr (D::kPlain) {
    for (int c = args.slices * D::kRunLength + threadIdx.x; c < args.cols; c += kThreads) {
      float xs[kTokens];
#pragma unroll
      for (int k = 0; k < kTokens; ++k) xs[k] = x[k][c];
      if constexpr (kNorm) sum_sq += xs[0] * xs[0], xs[0] *= args.norm.weight[c];
#pragma unroll
      for (int m = 0; m < kMats; ++m) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float w = D::value(rows[m][r], c);
#pragma unroll
          for (int k = 0; k < kTokens; ++k) acc[m][r][k] += w * xs[k];
        }
      }
    }
  }
}

// Adds one unit of 32 columns of each row to acc, from the rows' quants (codes) and each token's x
// codes: an integer dot product scaled by the weights' and x's scales.
template <class D, int kMats, int kRows, int kTokens>
__device__ __forceinline__ void add_integer_unit(const GemvArgs& args, const typename D::Codes (&codes)[kMats][kRows],
                                                 const int (&tokens)[kTokens], int unit,
                                                 float (&acc)[kMats][kRows][kTokens]) {
  const int row_units = args.cols / kRoundedBlockCols;
#pragma unroll
  for (int k = 0; k < kTokens; ++k) {
    const std::size_t at = static_cast<std::size_t>(tokens[k]) * row_units + unit;
    const auto* words = reinterpret_cast<const int4*>(args.rounded.codes + kRoundedBlockCols * at);
    int x_codes[8];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int4 w = words[j];
      x_codes[4 * j] = w.x, x_codes[4 * j + 1] = w.y, x_codes[4 * j + 2] = w.z, x_codes[4 * j + 3] = w.w;
    }
    const float x_scale = args.rounded.scales[at];
    const int x_sum = D::kUsesCodeSum ? args.rounded.code_sums[at] : 0;
#pragma unroll
    for (int m = 0; m < kMats; ++m) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[m][r][k] += D::dot(codes[m][r], x_codes, x_sum, x_scale);
    }
  }
}

// The same sums over a whole row, a thread taking units threadIdx.x, + kThreads, ...
template <class D, int kMats, int kRows, int kTokens>
__device__ __forceinline__ void accumulate_integer(const GemvArgs& args, const std::uint8_t* const (&rows)[kMats][kRows],
                                                   const int (&tokens)[kTokens], float (&acc)[kMats][kRows][kTokens]) {
  const int row_units = args.cols / kRoundedBlockCols;
#pragma unroll kUnroll
  for (int unit = threadIdx.x; unit < row_units; unit += kThreads) {
    typename D::Codes codes[kMats][kRows];
    for_each_row<kMats, kRows>([&](int m, int r) { D::load_codes(rows[m][r], row_units, unit, codes[m][r]); });
    add_integer_unit<D>(args, codes, tokens, unit, acc);
  }
}

// kPreload (the integer path, one token, rows of at most kBlockThreads units): a thread's one unit of
// each row loads before the wait for the kernel before. The kernels before these GEMVs (a norm, the
// decode attention, a rounding pass) leave most SMs idle, and no kernel writes weights, so the blocks
// that find room stream their rows while that kernel ends (measured: docs/perf_history.md, v12). Rows of
// more units than kThreads take a block of about as many threads (wide_preload_threads).
template <class D, int kMats, int kTokens, int kRows, bool kInteger, bool kNorm, bool kPreload,
          int kBlockThreads = kThreads>
__global__ void __launch_bounds__(kBlockThreads) gemv_kernel(const GemvArgs args) {
  static_assert(kPreload || kBlockThreads == kThreads, "the row loops stride by kThreads");
  // Consecutive blocks take the same rows for successive groups of tokens, so that all but the first
  // read the rows from L2. (A single token's kernel skips the division: decode waits on its loads'
  // addresses, and computing them later slowed Q8_0 and Q4_0 decode: docs/perf_history.md, "Figures
  // moved out of code comments".)
  int row_block = static_cast<int>(blockIdx.x), token0 = 0;
  if constexpr (kTokens > 1) {
    const int groups = (args.n_tokens + kTokens - 1) / kTokens;
    token0 = row_block % groups * kTokens;
    row_block /= groups;
  }
  // The block's segment, by constant indices only: a computed index would copy args to local memory.
  Segment seg = args.segments[0];
#pragma unroll
  for (int i = 1; i < kMaxSegments; ++i) {
    if (i < args.n_segments && row_block >= args.segments[i].first_block) seg = args.segments[i];
  }
  const int row0 = (row_block - seg.first_block) * kRows;
  // The block's vectors: entries [first, first + count) of its expert, else the tokens.
  int first = 0, count = args.n_tokens;
  if (args.experts.active) {
    begin_dependent();  // the routing is the kernel before's output (no preloading here)
    const int expert = args.experts.active[blockIdx.y];
    if (expert < 0) return;
    first = args.experts.begin[expert];
    count = args.experts.begin[expert + 1] - first;
    if (token0 >= count) return;
#pragma unroll
    for (int m = 0; m < kMats; ++m) seg.w[m] += static_cast<std::size_t>(expert) * args.experts.stride;
  }
  // A block's spare rows (and tokens) past the end re-read the last one; their sums are dropped.
  const std::uint8_t* rows[kMats][kRows];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) rows[m][r] = seg.w[m] + static_cast<std::size_t>(min(row0 + r, seg.rows - 1)) * args.row_bytes;
  }
  int tokens[kTokens];
  const float* x[kTokens];
#pragma unroll
  for (int k = 0; k < kTokens; ++k) {
    const int entry = first + (kTokens == 1 ? 0 : min(token0 + k, count - 1));
    tokens[k] = args.experts.x_row ? args.experts.x_row[entry] : entry;
    x[k] = args.x + static_cast<std::size_t>(tokens[k]) * args.cols;
  }
  // What a single token's y holds, where the product adds to it (thread r writes row r): loaded right
  // after the wait, before the weights, so that its latency hides behind theirs rather than ending the
  // block (measured: docs/perf_history.md, v11). A folded norm's products never add to y.
  auto load_before = [&] {
    float before = 0.0f;
    if constexpr (kTokens == 1 && kMats == 1 && !kNorm) {
      const int r = static_cast<int>(threadIdx.x);
      if (args.accumulate && r < kRows && row0 + r < seg.rows) before = seg.y[row0 + r];
    }
    return before;
  };
  float before = 0.0f;
  float acc[kMats][kRows][kTokens] = {};
  float sum_sq = 0.0f;
  if constexpr (kPreload) {
    static_assert(kInteger && kTokens == 1);
    const int unit = static_cast<int>(threadIdx.x), row_units = args.cols / kRoundedBlockCols;
    const bool has_unit = unit < row_units;
    typename D::Codes codes[kMats][kRows];
    if (has_unit) {
      for_each_row<kMats, kRows>([&](int m, int r) { D::load_codes(rows[m][r], row_units, unit, codes[m][r]); });
    }
    begin_dependent();
    before = load_before();
    if (has_unit) add_integer_unit<D>(args, codes, tokens, unit, acc);
  } else {
    begin_dependent();
    before = load_before();
    if constexpr (kInteger) {
      accumulate_integer<D>(args, rows, tokens, acc);
    } else {
      accumulate_decoded<D, kMats, kRows, kTokens, kNorm>(args, rows, x, acc, sum_sq);
    }
  }

  // Sums within each warp, then across the block's warps through shared memory.
  constexpr int kWarps = kBlockThreads / RF_WARP_SIZE;
  static_assert(kRows * kTokens <= kBlockThreads);
  __shared__ float partial[kWarps][kMats][kRows][kTokens];
  __shared__ float partial_sq[kWarps];
  const int lane = static_cast<int>(threadIdx.x) % RF_WARP_SIZE, warp = static_cast<int>(threadIdx.x) / RF_WARP_SIZE;
  if constexpr (kNorm) {
    for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) sum_sq += shuffle_xor(sum_sq, mask);
    if (lane == 0) partial_sq[warp] = sum_sq;
  }
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int k = 0; k < kTokens; ++k) {
        float v = acc[m][r][k];
        for (int mask = RF_WARP_SIZE / 2; mask > 0; mask /= 2) v += shuffle_xor(v, mask);
        if (lane == 0) partial[warp][m][r][k] = v;
      }
    }
  }
  __syncthreads();
  // Thread r + kRows * k writes row r of token k.
  const int r = static_cast<int>(threadIdx.x) % kRows, k = static_cast<int>(threadIdx.x) / kRows;
  if (k >= kTokens || row0 + r >= seg.rows || token0 + k >= count) return;
  // The folded norm's 1 / rms(x), as launch_rms_norm computes it.
  float scale = 1.0f;
  if constexpr (kNorm) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += partial_sq[w];
    scale = 1.0f / sqrtf(total / static_cast<float>(args.cols) + args.norm.eps);
  }
  float sums[kMats];
#pragma unroll
  for (int m = 0; m < kMats; ++m) {
    sums[m] = 0.0f;
    for (int w = 0; w < kWarps; ++w) sums[m] += partial[w][m][r][k];
    sums[m] *= scale;
  }
  float* y = seg.y + static_cast<std::size_t>(first + token0 + k) * seg.rows + row0 + r;
  if constexpr (kMats == 2) {
    *y = swiglu(sums[0], sums[1]);
  } else {
    *y = args.accumulate ? (kTokens == 1 && !kNorm ? before : *y) + sums[0] : sums[0];
  }
}

// Threads of a preloading block for rows of more than kThreads units: the row's unit count rounded up
// to whole 64-lane wavefronts, or 0 past kMostPreloadThreads; kWideRows rows a block. Llama 3 8B's down
// projection (14336 columns: 448 units), walked by 128 threads, left half of them a unit short of the
// others in the last of 3.5 rounds, its loads after the wait. Wide blocks won with 2 rows a block:
// with one, Q4_0 decode lost; with 4, it gained less (measured: docs/perf_history.md, v13).
constexpr int kMostPreloadThreads = 512;
constexpr int kWideRows = 2;
inline int wide_preload_threads(int row_units) {
  const int threads = (row_units + kMaxWarpSize - 1) / kMaxWarpSize * kMaxWarpSize;
  return threads > kThreads && threads <= kMostPreloadThreads ? threads : 0;
}

// Calls f(std::integral_constant<int, kTokens>{}) for the fewest tokens per block that serve n.
template <class F>
void with_tokens_per_block(int n_tokens, F&& f) {
  if (n_tokens == 1) return f(std::integral_constant<int, 1>{});
  if (n_tokens == 2) return f(std::integral_constant<int, 2>{});
  if (n_tokens <= 4) return f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, kMaxTokens>{});
}

template <class D, int kMats>
void launch_typed(GemvLaunch plan, const DeviceContext& ctx) {
  GemvArgs& args = plan.args;
  const ExpertProducts* experts = plan.experts;
  const char* name = plan.name;
  const int n_tokens = args.n_tokens;
  const bool integer = plan.integer, norm = args.norm.weight != nullptr;
  args.slices = args.cols;
  for (int i = 0; i < args.n_segments; ++i) {
    for (int m = 0; m < kMats; ++m) args.slices = std::min(args.slices, decodable_slices<D>(args.segments[i].w[m], args.cols, name));
  }
  // One token's long rows through the integer path: a block as wide as a row has units (see
  // wide_preload_threads), unless the sums must keep the order of several tokens' kernels.
  const int row_units = args.cols / kRoundedBlockCols;
  const bool preloads = n_tokens == 1 && integer && !experts;  // an expert's address waits for the routing
  const int wide_threads = preloads && kMats == 1 && !plan.fixed_order ? wide_preload_threads(row_units) : 0;
  with_tokens_per_block(n_tokens, [&](auto tokens) {
    constexpr int kTokens = decltype(tokens)::value;
    auto launch = [&](auto rows_per_block, auto integer_dot) {
      constexpr int kRows = decltype(rows_per_block)::value;
      int blocks = 0;
      for (int i = 0; i < args.n_segments; ++i) {
        args.segments[i].first_block = blocks;
        blocks += (args.segments[i].rows + kRows - 1) / kRows;
      }
      const long long row_blocks = static_cast<long long>(blocks) * ((n_tokens + kTokens - 1) / kTokens);
      require(row_blocks < (1ll << 31), name, "too many rows and tokens for one launch");
      const dim3 grid(static_cast<unsigned>(row_blocks), experts ? experts->active_slots : 1);
      constexpr bool kInteger = decltype(integer_dot)::value;
      if constexpr (kTokens == 1 && !kInteger) {
        if (norm) {
          return launch_dependent(gemv_kernel<D, kMats, kTokens, kRows, kInteger, true, false>, grid, kThreads, 0,
                                  ctx, args);
        }
      }
      if constexpr (kTokens == 1 && kInteger) {
        if (preloads && row_units <= kThreads) {
          return launch_dependent(gemv_kernel<D, kMats, kTokens, kRows, kInteger, false, true>, grid, kThreads, 0,
                                  ctx, args);
        }
        if constexpr (kMats == 1 && kRows == kWideRows) {
          if (wide_threads > 0) {
            auto launch_wide = [&](auto threads) {
              launch_dependent(gemv_kernel<D, kMats, kTokens, kRows, kInteger, false, true, decltype(threads)::value>,
                               grid, wide_threads, 0, ctx, args);
            };
            if (with_constant<192, 256, 320, 384, 448, kMostPreloadThreads>(wide_threads, launch_wide)) return;
          }
        }
      }
      launch_dependent(gemv_kernel<D, kMats, kTokens, kRows, kInteger, false, false>, grid, kThreads, 0, ctx, args);
    };
    if constexpr (D::kIntegerDot) {
      if (integer && kTokens == 1) {
        // Integer dot products leave a block little arithmetic, so more, smaller blocks keep more
        // loads in flight: one row per block where that is 4 KiB or more, else two (four for short
        // rows). But two rows of 4 KiB or more where a thread loads all its blocks of them before the
        // wait (rows of at most kThreads blocks, and wide rows): twice the bytes in flight a block
        // (measured on Q8_0: docs/perf_history.md, v13).
        const std::size_t bytes = kMats * args.row_bytes;
        if (wide_threads > 0) return launch(std::integral_constant<int, kWideRows>{}, std::true_type{});
        if (args.row_bytes >= 4096 && row_units <= kThreads && preloads) {
          return launch(std::integral_constant<int, 2>{}, std::true_type{});
        }
        if (bytes >= 4096) return launch(std::integral_constant<int, 1>{}, std::true_type{});
        // After the wide decode attention (one token of Llama 3 8B: 32 blocks that hold whole SMs), o's
        // 2,048 blocks of Q4_0 rows (2,304 bytes) no longer fit one wave of the other SMs, and those left
        // over load their rows only once the attention ends; 1,024 blocks of 4 rows fit. q/k/v at 4 rows
        // lost, and Q8_0's o (4,352-byte rows, 2 a block) gained nothing (measured: docs/perf_history.md,
        // v15).
        if (bytes >= 2048 && plan.after_wide_attention) return launch(std::integral_constant<int, 4>{}, std::true_type{});
        if (bytes >= 2048) return launch(std::integral_constant<int, 2>{}, std::true_type{});
        return launch(std::integral_constant<int, 4>{}, std::true_type{});
      }
      if (integer) return launch(std::integral_constant<int, kRowsPerBlock<D, kMats, kTokens>>{}, std::true_type{});
    }
    launch(std::integral_constant<int, kRowsPerBlock<D, kMats, kTokens>>{}, std::false_type{});
  });
}

}  // namespace rf::gpu::gemv_detail
