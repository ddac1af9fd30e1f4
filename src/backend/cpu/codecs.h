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
#include <cstring>

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

namespace codec_parts {

// 32 elements from 16 bytes of nibbles: elements 0-15 are the low nibbles of qs[0..16), elements 16-31
// the high ones; q = nibble - offset.
template <class L>
void nibbles32(const std::uint8_t* qs, int offset, typename L::V* q) {
  for (int i = 0; i < 4; ++i) q[i] = L::nibbles(qs + 8 * (i & 1), 4 * (i >> 1), offset);
}

// The same with a fifth bit: bit 4 of element j is bit j of the little-endian word at qh.
template <class L>
void nibbles5x32(const std::uint8_t* qs, const std::uint8_t* qh, int offset, typename L::V* q) {
  std::uint32_t high;
  std::memcpy(&high, qh, sizeof(high));
  for (int i = 0; i < 4; ++i) q[i] = L::nibbles5(qs + 8 * (i & 1), 4 * (i >> 1), (high >> 8 * i) & 0xff, offset);
}

// Q4_K's and Q5_K's super-blocks: 8 sub-blocks of 32 with scales d * sc and biases -dmin * m.
template <class B>
struct ScaleMinK4 {
  using Block = B;
  static constexpr int kBlockElems = 256, kGroupElems = 32;
  static constexpr bool kHasBias = true;
  template <class L>
  static void scales(const Block& b, float* scale, float* bias) {
    std::uint64_t sc, mn;
    unpack_scale_min_k4(b.scales, sc, mn);
    L::store(scale, L::mul(L::u8x8(sc), L::splat(L::half(b.d))));
    L::store(bias, L::mul(L::u8x8(mn), L::splat(-L::half(b.dmin))));
  }
};

// d * (s - 32) for the 8 6-bit scales s, one per byte of `s`.
template <class L>
typename L::V offset_scales(std::uint64_t s, float d) {
  return L::mul(L::add(L::u8x8(s), L::splat(-32.0f)), L::splat(d));
}

// GGML's 32-element blocks: one f16 scale d (x = d * q), or with an f16 offset m as well
// (x = d * q + m) where the block has one.
template <class B>
struct Block32 {
  using Block = B;
  static constexpr int kBlockElems = 32, kGroupElems = 32;
  static constexpr bool kHasBias = requires(const B& b) { b.m; };
  template <class L>
  static void scales(const Block& b, float* scale, float* bias) {
    scale[0] = L::half(b.d);
    if constexpr (kHasBias) bias[0] = L::half(b.m);
  }
};

}  // namespace codec_parts

template <>
struct Codec<DType::Q8_0> : codec_parts::Block32<BlockQ8_0> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) {
    for (int i = 0; i < 4; ++i) q[i] = L::i8(b.qs + 8 * i);
  }
};

template <>
struct Codec<DType::Q4_0> : codec_parts::Block32<BlockQ4_0> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) { codec_parts::nibbles32<L>(b.qs, 8, q); }
};

template <>
struct Codec<DType::Q4_K> : codec_parts::ScaleMinK4<BlockQ4_K> {
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
    L::template bits32<4, 2>(b.ql + 64 * h + 32 * (k & 1), 4 * (k >> 1), b.qh + 32 * h, 2 * k, 32, q);
  }
};

template <>
struct Codec<DType::Q4_1> : codec_parts::Block32<BlockQ4_1> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) { codec_parts::nibbles32<L>(b.qs, 0, q); }
};

template <>
struct Codec<DType::Q5_0> : codec_parts::Block32<BlockQ5_0> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) { codec_parts::nibbles5x32<L>(b.qs, b.qh, 16, q); }
};

template <>
struct Codec<DType::Q5_1> : codec_parts::Block32<BlockQ5_1> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) { codec_parts::nibbles5x32<L>(b.qs, b.qh, 0, q); }
};

template <>
struct Codec<DType::Q2_K> {
  using Block = BlockQ2_K;
  static constexpr int kBlockElems = 256, kGroupElems = 16;
  static constexpr bool kHasBias = true;
  template <class L>
  static void scales(const Block& b, float* scale, float* bias) {
    const auto d = L::splat(L::half(b.d)), minus_dmin = L::splat(-L::half(b.dmin));
    for (int i = 0; i < 2; ++i) {
      std::uint64_t packed;
      std::memcpy(&packed, b.scales + 8 * i, sizeof(packed));
      constexpr std::uint64_t kLow4 = 0x0f0f0f0f0f0f0f0f;
      L::store(scale + 8 * i, L::mul(L::u8x8(packed & kLow4), d));
      L::store(bias + 8 * i, L::mul(L::u8x8((packed >> 4) & kLow4), minus_dmin));
    }
  }
  // Elements [32c, 32c + 32) = 128h + 32k + [0, 32) with h = c / 4, k = c % 4.
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) {
    L::template bits32<2, 0>(b.qs + 32 * (c >> 2), 2 * (c & 3), nullptr, 0, 0, q);
  }
};

template <>
struct Codec<DType::Q3_K> {
  using Block = BlockQ3_K;
  static constexpr int kBlockElems = 256, kGroupElems = 16;
  static constexpr bool kHasBias = false;
  template <class L>
  static void scales(const Block& b, float* scale, float*) {
    std::uint64_t lo, hi;
    unpack_scales_q3_k(b.scales, lo, hi);
    const float d = L::half(b.d);
    L::store(scale, codec_parts::offset_scales<L>(lo, d));
    L::store(scale + 8, codec_parts::offset_scales<L>(hi, d));
  }
  // As Q2_K's, with the third bit (set: no offset of -4) from bit c of hmask.
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) {
    L::template bits32<2, 1>(b.qs + 32 * (c >> 2), 2 * (c & 3), b.hmask, c, 4, q);
  }
};

template <>
struct Codec<DType::Q5_K> : codec_parts::ScaleMinK4<BlockQ5_K> {
  // Q4_K's nibbles of sub-block c, with bit c of qh as the fifth bit.
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) {
    L::template bits32<4, 1>(b.qs + 32 * (c >> 1), 4 * (c & 1), b.qh, c, 0, q);
  }
};

template <>
struct Codec<DType::IQ4_NL> : codec_parts::Block32<BlockIQ4_NL> {
  template <class L>
  static void load32(const Block& b, int, typename L::V* q) { L::iq4x32(b.qs, q); }
};

template <>
struct Codec<DType::IQ4_XS> {
  using Block = BlockIQ4_XS;
  static constexpr int kBlockElems = 256, kGroupElems = 32;
  static constexpr bool kHasBias = false;
  template <class L>
  static void scales(const Block& b, float* scale, float*) {
    L::store(scale, codec_parts::offset_scales<L>(unpack_scales_iq4_xs(b), L::half(b.d)));
  }
  template <class L>
  static void load32(const Block& b, int c, typename L::V* q) { L::iq4x32(b.qs + 16 * c, q); }
};

}  // namespace rf::cpu
