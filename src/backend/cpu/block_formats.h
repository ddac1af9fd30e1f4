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

static_assert(sizeof(BlockQ8_0) == dtype_info(DType::Q8_0).block_bytes);
static_assert(sizeof(BlockQ4_0) == dtype_info(DType::Q4_0).block_bytes);
static_assert(sizeof(BlockQ4_K) == dtype_info(DType::Q4_K).block_bytes);
static_assert(sizeof(BlockQ6_K) == dtype_info(DType::Q6_K).block_bytes);

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

}  // namespace rf::cpu
