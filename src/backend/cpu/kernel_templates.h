#pragma once
// The CPU kernels, written once over a lanes policy L (see codecs.h) and instantiated per
// instruction set by kernels_scalar.cpp and kernels_avx2.cpp through make_kernel_table<L>().
// Like codecs.h, everything here must stay a template over L (kernels_avx2.cpp compiles it under
// an AVX2 target pragma).
#include <cstddef>
#include <utility>

#include "backend/cpu/codecs.h"
#include "backend/cpu/kernel_table.h"

namespace rf::cpu::kernels_impl {

// ---- Plain types: 8 elements per vector, scalar tail ----

template <class L, DType T>
void dequantize_plain(const void* src, float* dst, std::size_t n) {
  using C = Codec<T>;
  const auto* p = static_cast<const typename C::Elem*>(src);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) L::store(dst + i, C::template load8<L>(p + i));
  for (; i < n; ++i) dst[i] = C::template load1<L>(p[i]);
}

template <class L, DType T>
float dot_plain(const void* row, const float* x, std::size_t n) {
  using C = Codec<T>;
  const auto* p = static_cast<const typename C::Elem*>(row);
  // Four accumulators hide the FMA latency.
  typename L::V acc[4] = {L::zero(), L::zero(), L::zero(), L::zero()};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int u = 0; u < 4; ++u) acc[u] = L::fma(C::template load8<L>(p + i + 8 * u), L::load(x + i + 8 * u), acc[u]);
  }
  for (; i + 8 <= n; i += 8) acc[0] = L::fma(C::template load8<L>(p + i), L::load(x + i), acc[0]);
  float sum = L::sum(L::add(L::add(acc[0], acc[1]), L::add(acc[2], acc[3])));
  for (; i < n; ++i) sum += C::template load1<L>(p[i]) * x[i];
  return sum;
}

// ---- Quantized types: whole blocks of groups sharing a scale and bias ----

template <class L, DType T>
void dequantize_blocks(const void* src, float* dst, std::size_t n) {
  using C = Codec<T>;
  const auto* blocks = static_cast<const typename C::Block*>(src);
  for (std::size_t b = 0; b < n / C::kBlockElems; ++b, dst += C::kBlockElems) {
    float scale[C::kBlockElems / C::kGroupElems], bias[C::kBlockElems / C::kGroupElems];
    C::template scales<L>(blocks[b], scale, bias);
#pragma GCC unroll 8  // constant shifts and scale offsets
    for (int c = 0; c < C::kBlockElems / 32; ++c) {
      typename L::V q[4];
      C::template load32<L>(blocks[b], c, q);
      for (int i = 0; i < 4; ++i) {
        const int g = (32 * c + 8 * i) / C::kGroupElems;
        if constexpr (C::kHasBias) {
          L::store(dst + 32 * c + 8 * i, L::fma(q[i], L::splat(scale[g]), L::splat(bias[g])));
        } else {
          L::store(dst + 32 * c + 8 * i, L::mul(q[i], L::splat(scale[g])));
        }
      }
    }
  }
}

// acc += sum over the block of scale * q * x; acc_bias += the bias terms (bias * sum of x per group),
// kept apart so the two dependency chains overlap. Forced inline: as a call, the accumulators
// would make a round trip through memory for every group.
template <class L, DType T>
[[gnu::always_inline]] inline void accumulate_block(const typename Codec<T>::Block& block, const float* x,
                                                    typename L::V& acc, typename L::V& acc_bias) {
  using C = Codec<T>;
  constexpr int kGroupVecs = C::kGroupElems / 8;
  float scale[C::kBlockElems / C::kGroupElems], bias[C::kBlockElems / C::kGroupElems];
  C::template scales<L>(block, scale, bias);
#pragma GCC unroll 8  // constant shifts and scale offsets
  for (int c = 0; c < C::kBlockElems / 32; ++c) {
    typename L::V q[4];
    C::template load32<L>(block, c, q);
    for (int i0 = 0; i0 < 4; i0 += kGroupVecs) {
      const float* xg = x + 32 * c + 8 * i0;
      const int g = (32 * c + 8 * i0) / C::kGroupElems;
      auto qx = L::mul(q[i0], L::load(xg));
      for (int i = 1; i < kGroupVecs; ++i) qx = L::fma(q[i0 + i], L::load(xg + 8 * i), qx);
      acc = L::fma(L::splat(scale[g]), qx, acc);
      if constexpr (C::kHasBias) {
        auto xsum = L::load(xg);
        for (int i = 1; i < kGroupVecs; ++i) xsum = L::add(xsum, L::load(xg + 8 * i));
        acc_bias = L::fma(L::splat(bias[g]), xsum, acc_bias);
      }
    }
  }
}

template <class L, DType T>
float dot_blocks(const void* row, const float* x, std::size_t n) {
  using C = Codec<T>;
  constexpr std::size_t kBlockElems = C::kBlockElems;
  const auto* blocks = static_cast<const typename C::Block*>(row);
  const std::size_t nb = n / kBlockElems;
  // Two blocks per step into separate accumulators: one Q8_0 block is too little work to hide
  // the latency of a single accumulator chain.
  typename L::V acc[2] = {L::zero(), L::zero()}, acc_bias[2] = {L::zero(), L::zero()};
  std::size_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    accumulate_block<L, T>(blocks[b], x + b * kBlockElems, acc[0], acc_bias[0]);
    accumulate_block<L, T>(blocks[b + 1], x + (b + 1) * kBlockElems, acc[1], acc_bias[1]);
  }
  if (b < nb) accumulate_block<L, T>(blocks[b], x + b * kBlockElems, acc[0], acc_bias[0]);
  return L::sum(L::add(L::add(acc[0], acc[1]), L::add(acc_bias[0], acc_bias[1])));
}

template <class L, DType T>
void dequantize(const void* src, float* dst, std::size_t n) {
  if constexpr (is_quantized(T)) {
    dequantize_blocks<L, T>(src, dst, n);
  } else {
    dequantize_plain<L, T>(src, dst, n);
  }
}

template <class L, DType T>
float dot(const void* row, const float* x, std::size_t n) {
  if constexpr (is_quantized(T)) {
    return dot_blocks<L, T>(row, x, n);
  } else {
    return dot_plain<L, T>(row, x, n);
  }
}

// ---- fp32 GEMM on decoded tiles ----

// R weight rows x T tokens, held in R x T accumulators (L::kMicroRows x L::kMicroTokens at most,
// sized to the registers). Both operands are contiguous along k, so each accumulator holds 8
// partial sums of one output.
template <class L, int R, int T>
void gemm_micro(const GemmTile& a, std::size_t r0, std::size_t t0) {
  const float* w = a.w + r0 * a.w_stride;
  const float* x = a.x + t0 * a.x_stride;
  typename L::V acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = L::zero();
  }
  std::size_t c = 0;
  for (; c + 8 <= a.k; c += 8) {
    typename L::V wv[R];
    for (int r = 0; r < R; ++r) wv[r] = L::load(w + r * a.w_stride + c);
    for (int t = 0; t < T; ++t) {
      const auto xv = L::load(x + t * a.x_stride + c);
      for (int r = 0; r < R; ++r) acc[r][t] = L::fma(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float sum = L::sum(acc[r][t]);
      for (std::size_t cc = c; cc < a.k; ++cc) sum += w[r * a.w_stride + cc] * x[t * a.x_stride + cc];
      float& o = a.out[(t0 + t) * a.out_stride + r0 + r];
      o = a.accumulate ? o + sum : sum;
    }
  }
}

// Rows [r0, rows) against tokens [t0, t0 + T) in blocks of R rows; the rows left over (fewer than R)
// go to the next smaller block.
template <class L, int T, int R = L::kMicroRows>
void gemm_rows(const GemmTile& a, std::size_t r0, std::size_t t0) {
  for (; r0 + R <= a.rows; r0 += R) gemm_micro<L, R, T>(a, r0, t0);
  if constexpr (R > 1) gemm_rows<L, T, R - 1>(a, r0, t0);
}

// Tokens [t0, tokens) in blocks of T, each block's slice of x staying in L1 while all rows pass.
template <class L, int T = L::kMicroTokens>
void gemm_tokens(const GemmTile& a, std::size_t t0) {
  for (; t0 + T <= a.tokens; t0 += T) gemm_rows<L, T>(a, 0, t0);
  if constexpr (T > 1) gemm_tokens<L, T - 1>(a, t0);
}

template <class L>
void gemm(const GemmTile& a) {
  gemm_tokens<L>(a, 0);
}

template <class L, std::size_t... I>
constexpr KernelTable make_kernel_table(std::index_sequence<I...>) {
  return {{&dequantize<L, static_cast<DType>(I)>...}, {&dot<L, static_cast<DType>(I)>...}, &gemm<L>};
}

template <class L>
constexpr KernelTable make_kernel_table() {
  return make_kernel_table<L>(std::make_index_sequence<kNumDTypes>{});
}

}  // namespace rf::cpu::kernels_impl
