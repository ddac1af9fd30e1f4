#pragma once
// How each stored type decodes, written once over a "lanes" policy L so that the scalar and the
// AVX2 kernels share it. L supplies an 8-wide float vector L::V and a few conversions
// (kernels_scalar.cpp documents them).
//
// Plain types: Codec<T>::load8<L>(p) decodes 8 elements, load1<L>(e) one element (row tails).
// Quantized types: a block of kBlockElems elements is made of groups of kGroupElems sharing
// x = scale * q + bias. scales<L>(block, scale, bias) fills each group's scale and, for kHasBias
// types, bias; load32<L>(block, c, q) puts the q of elements [32c, 32c + 32) in q[0..4).
//
// Every function here is a template over L on purpose: kernels_avx2.cpp compiles this header under
// an AVX2 target pragma, and only instantiations over its own (internal) lanes type may carry that.
#include <cstdint>

#include "backend/cpu/block_formats.h"
#include "formats/dtype.h"
#include "util/half.h"

namespace rf::cpu {

template <DType T>
struct Codec;

template <>
struct Codec<DType::F32> {
  using Elem = float;
  template <class L>
  static auto load8(const float* p) { return L::load(p); }
  template <class L>
  static float load1(float e) { return e; }
};

template <>
struct Codec<DType::F16> {
  using Elem = std::uint16_t;
  template <class L>
  static auto load8(const std::uint16_t* p) { return L::f16(p); }
  template <class L>
  static float load1(std::uint16_t e) { return L::half(e); }
};

template <>
struct Codec<DType::BF16> {
  using Elem = std::uint16_t;
  template <class L>
  static auto load8(const std::uint16_t* p) { return L::bf16(p); }
  template <class L>
  static float load1(std::uint16_t e) { return bf16_to_f32(e); }
};

template <>
struct Codec<DType::Q8_0> {
  using Block = BlockQ8_0;
  static constexpr int kBlockElems = 32, kGroupElems = 32;
  static constexpr bool kHasBias = false;
  template <class L>
  static void scales(const Block& b, float* scale, float*) { scale[0] = L::half(b.d); }
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) {
    for (int i = 0; i < 4; ++i) q[i] = L::i8(b.qs + 8 * i);
  }
};

template <>
struct Codec<DType::Q4_0> {
  using Block = BlockQ4_0;
  static constexpr int kBlockElems = 32, kGroupElems = 32;
  static constexpr bool kHasBias = false;
  template <class L>
  static void scales(const Block& b, float* scale, float*) { scale[0] = L::half(b.d); }
  // Elements 0-15 are the low nibbles of qs[0..16), elements 16-31 the high ones.
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) {
    for (int i = 0; i < 4; ++i) q[i] = L::nibbles(b.qs + 8 * (i & 1), 4 * (i >> 1), 8);
  }
};

template <>
struct Codec<DType::Q4_K> {
  using Block = BlockQ4_K;
  static constexpr int kBlockElems = 256, kGroupElems = 32;
  static constexpr bool kHasBias = true;
  template <class L>
  static void scales(const Block& b, float* scale, float* bias) {
    std::uint64_t sc, mn;
    unpack_scale_min_k4(b.scales, sc, mn);
    L::store(scale, L::mul(L::u8x8(sc), L::splat(L::half(b.d))));
    L::store(bias, L::mul(L::u8x8(mn), L::splat(-L::half(b.dmin))));
  }
  // Sub-block c: the low (c even) or high (c odd) nibbles of qs[32(c / 2), 32(c / 2) + 32).
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) {
    for (int i = 0; i < 4; ++i) q[i] = L::nibbles(b.qs + 32 * (c >> 1) + 8 * i, 4 * (c & 1), 0);
  }
};

template <>
struct Codec<DType::Q6_K> {
  using Block = BlockQ6_K;
  static constexpr int kBlockElems = 256, kGroupElems = 16;
  static constexpr bool kHasBias = false;
  template <class L>
  static void scales(const Block& b, float* scale, float*) {
    const auto d = L::splat(L::half(b.d));
    for (int i = 0; i < 2; ++i) L::store(scale + 8 * i, L::mul(L::i8(b.scales + 8 * i), d));
  }
  // Elements [32c, 32c + 32) = 128h + 32k + [0, 32) with h = c / 4, k = c % 4.
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) {
    const int h = c >> 2, k = c & 3;
    L::q6x32(b.ql + 64 * h + 32 * (k & 1), 4 * (k >> 1), b.qh + 32 * h, 2 * k, q);
  }
};

}  // namespace rf::cpu
