// The GEMM of a decode batch (up to 64 tokens) with quantized weights on NVIDIA's integer tensor cores
// (mma.sync m16n8k16 s8, sm_80+), as llama.cpp's MMQ does: x's int8 copy in blocks of 32 (made by
// the kernel that makes x, as for the one-token GEMV), each weight unit's codes (dequantize.cuh: 32
// columns, the unit the GEMV's integer path reads) from their device layout straight into A
// fragments, and each unit's int32 products scaled into fp32 sums. Without it a decode batch decoded
// every weight to f16 for cuBLAS, step after step (docs/perf_history.md, issue #25).
//
// A block takes 16 rows and all the tokens; its 8 warps take the row's units in turns of kAhead
// consecutive units, loading all of a turn's codes before using any. Lane t of a row's 4 lanes holds
// its row's whole unit (one load of the decoder's), and gives the mma the 4 columns 4t.. of each
// 16-column half; x's codes come from L2 the same way. The warps' sums meet in shared memory in a
// fixed order.
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

template <class D, int kTokenTiles>
__global__ void __launch_bounds__(kThreads)
    quantized_few_tokens_kernel(const std::uint8_t* w, std::size_t row_bytes, int rows, int cols, QuantizedActivations x,
                                int n_tokens, float* out) {
#if __CUDA_ARCH__ >= 800
  constexpr int kValues = kTokenTiles * 4;
  __shared__ float partial[kWarps / 2][kValues][kLanes];
  const int lane = threadIdx.x % kLanes, warp = threadIdx.x / kLanes;
  const int g = lane / 4, t = lane % 4;
  const int row_units = cols / kRoundedBlockCols;
  const int first_row = blockIdx.x * kTileRows;
  // This lane's rows g and g + 8 (A's rows, C's rows); a last block's rows past the end are read, never
  // written.
  const std::uint8_t* row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) row[r] = w + static_cast<std::size_t>(min(first_row + g + 8 * r, rows - 1)) * row_bytes;
  // Token tile n: B's column g is token 8n + g; C's columns 2t and 2t + 1 are tokens 8n + 2t + j.
  int b_token[kTokenTiles], c_token[kTokenTiles][2];
#pragma unroll
  for (int n = 0; n < kTokenTiles; ++n) {
    b_token[n] = min(kTileTokens * n + g, n_tokens - 1);
#pragma unroll
    for (int j = 0; j < 2; ++j) c_token[n][j] = min(kTileTokens * n + 2 * t + j, n_tokens - 1);
  }
  float acc[kTokenTiles][4] = {};
  bool waited = false;
  for (int base = warp * kAhead; base < row_units; base += kWarps * kAhead) {
    typename D::Codes codes[kAhead][2];
#pragma unroll
    for (int a = 0; a < kAhead; ++a) {
      if (base + a < row_units) {
#pragma unroll
        for (int r = 0; r < 2; ++r) D::load_codes(row[r], row_units, base + a, codes[a][r]);
      }
    }
    if (!waited) begin_dependent(), waited = true;  // x is the kernel before's output
#pragma unroll
    for (int a = 0; a < kAhead; ++a) {
      const int unit = base + a;
      if (unit >= row_units) break;
      int a_frag[2][2];  // [half][row g, g + 8]
      float scale[2][2], offset[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          a_frag[h][r] = D::unit_word(codes[a][r], h, t);
          scale[r][h] = D::unit_scale(codes[a][r], h);
        }
        offset[r] = D::unit_offset(codes[a][r]);
      }
#pragma unroll
      for (int n = 0; n < kTokenTiles; ++n) {
        const std::size_t b_at = static_cast<std::size_t>(b_token[n]) * row_units + unit;
        const int* x_words = reinterpret_cast<const int*>(x.codes + kRoundedBlockCols * b_at);
        int c[2][4] = {};
#pragma unroll
        for (int h = 0; h < 2; ++h) mma_s8(c[h], a_frag[h][0], a_frag[h][1], x_words[4 * h + t]);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const std::size_t at = static_cast<std::size_t>(c_token[n][j]) * row_units + unit;
          const float x_scale = x.scales[at];
          const float x_sum = D::kUsesCodeSum ? static_cast<float>(x.code_sums[at]) : 0.0f;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int i = 2 * r + j;  // C's value at row g + 8r, token 2t + j
            float v = scale[r][0] * static_cast<float>(c[0][i]) + scale[r][1] * static_cast<float>(c[1][i]);
            if constexpr (D::kUsesCodeSum) v -= offset[r] * x_sum;
            acc[n][i] += x_scale * v;
          }
        }
      }
    }
  }
  if (!waited) begin_dependent();
  sum_warps_in_tree<kWarps, kLanes, kValues>(&acc[0][0], &partial[0][0][0]);
  if (warp != 0) return;
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

template <class D, int kTokenTiles>
void launch_tiles(const WeightMatrix& w, QuantizedActivations x, int n_tokens, float* out, const DeviceContext& ctx) {
  const int blocks = static_cast<int>((w.rows + kTileRows - 1) / kTileRows);
  launch_dependent(quantized_few_tokens_kernel<D, kTokenTiles>, dim3(blocks), dim3(kThreads), 0, ctx,
                   static_cast<const std::uint8_t*>(w.data), row_bytes(w.dtype, w.cols), static_cast<int>(w.rows),
                   static_cast<int>(w.cols), x, n_tokens, out);
}

#endif

}  // namespace

#if defined(ROCMFORGE_GPU_CUDA)

bool quantized_few_tokens_available() {
  return built_for_tensor_cores(quantized_few_tokens_kernel<Decoder<DType::Q4_0>, 1>);
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
        case 1: return launch_tiles<D, 1>(w, x, n_tokens, out, ctx);
        case 2: return launch_tiles<D, 2>(w, x, n_tokens, out, ctx);
        case 3:
        case 4: return launch_tiles<D, 4>(w, x, n_tokens, out, ctx);
        default: return launch_tiles<D, 8>(w, x, n_tokens, out, ctx);
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
