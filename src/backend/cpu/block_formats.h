#pragma once
// GGML's quantized block layouts (ggml-common.h), byte for byte: GGUF files are mapped straight onto
// these structs. All fields are little-endian; f16 fields are raw IEEE binary16 bits.
#include <cstdint>
#include <cstring>

#include "formats/dtype.h"

namespace rf::cpu {

// 32 elements: x = d * q.
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[32];
};

// 32 elements: x = d * (q - 8); element j < 16 is the low nibble of qs[j], element j + 16 the high nibble.
struct BlockQ4_0 {
  std::uint16_t d;
  std::uint8_t qs[16];
};

// 256 elements in 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], with 6-bit sc/m packed in
// `scales` (see unpack_scale_min_k4). Sub-blocks 2i and 2i + 1 share the bytes qs[32i, 32i + 32):
// low nibbles for the first, high nibbles for the second.
struct BlockQ4_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};

// 256 elements in 16 sub-blocks of 16: x = d * scales[j] * (q - 32) with 6-bit q. Element
// e = 128h + 32k + l (h < 2, k < 4, l < 32) takes its low 4 bits from
// ql[64h + 32(k & 1) + l] >> 4(k >> 1) and its high 2 bits from qh[32h + l] >> 2k.
struct BlockQ6_K {
  std::uint8_t ql[128];
  std::uint8_t qh[64];
  std::int8_t scales[16];
  std::uint16_t d;
};

// 32 elements: x = d * q + m, q the nibbles laid out as in BlockQ4_0.
struct BlockQ4_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qs[16];
};

// 32 elements: x = d * (q - 16) with 5-bit q: its low 4 bits are nibbles laid out as in BlockQ4_0,
// bit 4 of element j is bit j of qh read as a little-endian 32-bit word.
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};

// 32 elements: x = d * q + m, q as in BlockQ5_0 (without the offset).
struct BlockQ5_1 {
  std::uint16_t d;
  std::uint16_t m;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};

// 256 elements in 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4) with 2-bit q.
// Element e = 128h + 32k + l (h < 2, k < 4, l < 32) is (qs[32h + l] >> 2k) & 3; its group is e / 16.
struct BlockQ2_K {
  std::uint8_t scales[16];
  std::uint8_t qs[64];
  std::uint16_t d;
  std::uint16_t dmin;
};

// 256 elements in 16 groups of 16: x = d * (s[g] - 32) * q with q in [-4, 3] and 6-bit s packed in
// `scales` (see unpack_scales_q3_k). Element e = 128h + 32k + l takes (qs[32h + l] >> 2k) & 3, less 4
// unless bit 4h + k (= e / 32) of hmask[l] is set.
struct BlockQ3_K {
  std::uint8_t hmask[32];
  std::uint8_t qs[64];
  std::uint8_t scales[12];
  std::uint16_t d;
};

// BlockQ4_K with a fifth bit: bit 4 of element l of sub-block c is bit c of qh[l].
struct BlockQ5_K {
  std::uint16_t d;
  std::uint16_t dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[32];
  std::uint8_t qs[128];
};

// The 16 values of the IQ4 types' 4-bit codes (GGML's kvalues_iq4nl).
inline constexpr std::int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};

// 32 elements: x = d * kIq4Values[n], the codes n laid out as BlockQ4_0's nibbles.
struct BlockIQ4_NL {
  std::uint16_t d;
  std::uint8_t qs[16];
};

// 256 elements in 8 sub-blocks of 32: x = d * (s[c] - 32) * kIq4Values[n] with 6-bit s (see
// unpack_scales_iq4_xs); sub-block c's codes are qs[16c, 16c + 16) laid out as BlockIQ4_NL's.
struct BlockIQ4_XS {
  std::uint16_t d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[4];
  std::uint8_t qs[128];
};

static_assert(sizeof(BlockQ8_0) == dtype_info(DType::Q8_0).block_bytes);
static_assert(sizeof(BlockQ4_0) == dtype_info(DType::Q4_0).block_bytes);
static_assert(sizeof(BlockQ4_K) == dtype_info(DType::Q4_K).block_bytes);
static_assert(sizeof(BlockQ6_K) == dtype_info(DType::Q6_K).block_bytes);
static_assert(sizeof(BlockQ4_1) == dtype_info(DType::Q4_1).block_bytes);
static_assert(sizeof(BlockQ5_0) == dtype_info(DType::Q5_0).block_bytes);
static_assert(sizeof(BlockQ5_1) == dtype_info(DType::Q5_1).block_bytes);
static_assert(sizeof(BlockQ2_K) == dtype_info(DType::Q2_K).block_bytes);
static_assert(sizeof(BlockQ3_K) == dtype_info(DType::Q3_K).block_bytes);
static_assert(sizeof(BlockQ5_K) == dtype_info(DType::Q5_K).block_bytes);
static_assert(sizeof(BlockIQ4_NL) == dtype_info(DType::IQ4_NL).block_bytes);
static_assert(sizeof(BlockIQ4_XS) == dtype_info(DType::IQ4_XS).block_bytes);

// The 6-bit scales and mins of BlockQ4_K's 8 sub-blocks, one byte each: bytes 0-3 of `scales`
// hold the scales of sub-blocks 0-3, bytes 4-7 their mins, and bytes 8-11 the low 4 bits of
// sub-blocks 4-7 (scale | min << 4), whose high 2 bits sit in the top bits of bytes 0-3 (scales)
// and 4-7 (mins). Works on 32-bit words, four sub-blocks at a time (little-endian, like the file);
// GGML's get_scale_min_k4 unpacks one sub-block.
inline void unpack_scale_min_k4(const std::uint8_t* scales, std::uint64_t& sc, std::uint64_t& mn) {
  std::uint32_t w[3];
  std::memcpy(w, scales, sizeof(w));
  const std::uint32_t sc_lo = w[0] & 0x3f3f3f3f, mn_lo = w[1] & 0x3f3f3f3f;
  const std::uint32_t sc_hi = (w[2] & 0x0f0f0f0f) | ((w[0] >> 6) & 0x03030303) << 4;
  const std::uint32_t mn_hi = ((w[2] >> 4) & 0x0f0f0f0f) | ((w[1] >> 6) & 0x03030303) << 4;
  sc = sc_lo | std::uint64_t{sc_hi} << 32;
  mn = mn_lo | std::uint64_t{mn_hi} << 32;
}

// The 6-bit scales of BlockQ3_K's 16 groups, one byte each (groups 0-7 in lo, 8-15 in hi): bytes 0-7
// of `scales` hold the low 4 bits of groups 0-7 (low nibbles) and 8-15 (high nibbles), and bits
// 2(g / 4), +1 of byte 8 + g % 4 the high 2 bits of group g. As GGML's dequantize_row_q3_K, on
// 32-bit words.
inline void unpack_scales_q3_k(const std::uint8_t* scales, std::uint64_t& lo, std::uint64_t& hi) {
  std::uint32_t w[3];
  std::memcpy(w, scales, sizeof(w));
  constexpr std::uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const std::uint32_t s0 = (w[0] & kLow4) | (w[2] & kLow2) << 4;
  const std::uint32_t s1 = (w[1] & kLow4) | ((w[2] >> 2) & kLow2) << 4;
  const std::uint32_t s2 = ((w[0] >> 4) & kLow4) | ((w[2] >> 4) & kLow2) << 4;
  const std::uint32_t s3 = ((w[1] >> 4) & kLow4) | ((w[2] >> 6) & kLow2) << 4;
  lo = s0 | std::uint64_t{s1} << 32;
  hi = s2 | std::uint64_t{s3} << 32;
}

// The 6-bit scales of BlockIQ4_XS's 8 sub-blocks, one byte each: the low 4 bits of sub-block c are
// nibble c of scales_l, its high 2 bits field c of scales_h.
inline std::uint64_t unpack_scales_iq4_xs(const BlockIQ4_XS& b) {
  std::uint64_t s = 0;
  for (int c = 0; c < 8; ++c) {
    const std::uint64_t low = (b.scales_l[c / 2] >> 4 * (c % 2)) & 15, high = (b.scales_h >> 2 * c) & 3;
    s |= (low | high << 4) << 8 * c;
  }
  return s;
}

}  // namespace rf::cpu
