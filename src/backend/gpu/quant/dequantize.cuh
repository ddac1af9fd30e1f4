#pragma once
// How each stored type decodes on the GPU: the device twin of backend/cpu/codecs.h. Every kernel
// that reads weights (embedding lookup, GEMV, GEMM operand loads) decodes through these, in
// registers: there is never a decoded copy of a weight.
//
// A row is cut into slices, each the part one thread decodes at a time. A slice is kRuns runs of
// kRunLength consecutive columns (run r starts at column[r]) whose values are scale[r] * q, plus
// bias[r] where the type has one (kHasBias).
// Quantized types have kSlicesPerBlock slices per GGML block of kBlockElems columns. Plain types
// (f32, f16, bf16) treat 16 bytes as a "block" of one slice, loaded at once; rows whose length is not
// a whole number of such blocks are read element by element through value() instead.
//
// The quantized types also multiply int8 activations (QuantizedActivations, quant/activation_copies.h)
// by integer dot products (kIntegerDot), a unit of 32 columns (one block of x's codes) at a time:
// load_codes() takes a unit's quants as stored and its scales, dot() their product with x's 32 codes
// of the same columns (x_sum: their sum, for offsets and mins; x_scale: their scale). The tensor-core
// path of decode batches (gemm_quantized_few_tokens.cu) takes a unit as two halves of 16 columns:
// unit_word() the signed codes of 4 of their columns, unit_scale() each half's scale and unit_offset()
// what every element subtracts (w = scale * code - offset).
//
// Layout (device_layout.h): Q8_0, Q4_0 and Q6_K rows are split on upload into runs of one kind of
// field each (a row's quants first, 16 bytes a unit), Q4_K's and Q5_K's blocks rearranged in place, so
// that a unit's quants are one 16-byte load and its codes line up with x's for dp4a. GGML's 18-, 34-
// and 210-byte blocks would allow 2-byte loads only. The other types keep GGML's layout and decode to
// fp32 only.
#include <cstddef>
#include <cstdint>

#include "backend/cpu/block_formats.h"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/runtime/vendor.h"
#include "formats/dtype.h"

namespace rf::gpu {

// A block's quants as stored (kVectors of 16 bytes), and its scale: the integer path's decode.
template <int kVectors>
struct Codes {
  uint4 q[kVectors];
  float scale;
};

template <int kRuns, int kRunLength>
struct Slice {
  float q[kRuns][kRunLength];
  float scale[kRuns];
  float bias[kRuns];
  int column[kRuns];
};

namespace detail {

__device__ __forceinline__ uint4 load_16_bytes(const std::uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }

// Four bytes at a 4-byte-aligned address.
__device__ __forceinline__ std::uint32_t load_word(const std::uint8_t* p) { return *reinterpret_cast<const std::uint32_t*>(p); }

// Four bytes at a 2-byte-aligned address.
__device__ __forceinline__ std::uint32_t load_4_bytes(const std::uint8_t* p) {
  const auto* halves = reinterpret_cast<const std::uint16_t*>(p);
  return halves[0] | static_cast<std::uint32_t>(halves[1]) << 16;
}

// Sixteen bytes at a 2-byte-aligned address: one load where it is 16-byte aligned (split rows
// whose length is a multiple of 16 bytes, most of them in real models), else four.
__device__ __forceinline__ uint4 load_16_bytes_any(const std::uint8_t* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 16 == 0) return load_16_bytes(p);
  return {load_4_bytes(p), load_4_bytes(p + 4), load_4_bytes(p + 8), load_4_bytes(p + 12)};
}

// Eight bytes at a 2-byte-aligned address, likewise.
__device__ __forceinline__ uint2 load_8_bytes_any(const std::uint8_t* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0) return *reinterpret_cast<const uint2*>(p);
  return {load_4_bytes(p), load_4_bytes(p + 4)};
}

__device__ __forceinline__ std::uint32_t word_of(const uint4& v, int k) { return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w; }

__device__ __forceinline__ float load_half(const std::uint8_t* p) {
  return half_bits_to_float(*reinterpret_cast<const std::uint16_t*>(p));
}

__device__ __forceinline__ std::uint32_t byte_of(std::uint32_t word, int i) { return (word >> (8 * i)) & 0xFFu; }

// float(v) - offset, exactly, for quant codes v < 2^23 and small integer offsets: v is planted in the
// significand of 2^23 and 2^23 + offset subtracted. One OR and one FADD, where an int-to-float
// conversion runs at a quarter of the FP32 rate.
__device__ __forceinline__ float code_to_float(std::uint32_t v, float offset) {
  return __uint_as_float(0x4B000000u | v) - (8388608.0f + offset);
}

// code_to_float for byte k of `word`: one byte permute plants it in 2^23's significand, so a byte
// costs a PRMT and an FADD where a shift, a mask and an OR would come before the FADD.
__device__ __forceinline__ float byte_to_float(std::uint32_t word, int k, float offset) {
  return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7440u | static_cast<unsigned>(k))) - (8388608.0f + offset);
}

// 32 elements as 16 bytes of nibbles (byte i: element i low, element 16 + i high): 4 of their codes,
// their dot product with x's 32 codes, and their values less `offset` into a slice's two runs.
// nibble_word: the codes of elements 16 half + 4k + [0, 4), one a byte.
__device__ __forceinline__ int nibble_word(const uint4& q, int half, int k) {
  return static_cast<int>((word_of(q, k) >> (4 * half)) & 0x0F0F0F0Fu);
}
__device__ __forceinline__ int dot_nibbles(const uint4& q, const int (&x)[8]) {
  int sum = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    sum = dot4_i8(nibble_word(q, 0, j), x[j], sum);
    sum = dot4_i8(nibble_word(q, 1, j), x[4 + j], sum);
  }
  return sum;
}
template <class Slice>
__device__ __forceinline__ void nibble_values(const uint4& q, float offset, Slice& s) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int i = 0; i < 16; ++i) s.q[half][i] = byte_to_float(static_cast<std::uint32_t>(nibble_word(q, half, i / 4)), i % 4, offset);
  }
}

// `word` with bit `from` moved to bit `to` (and every other bit by as much).
__device__ __forceinline__ std::uint32_t shift_bits(std::uint32_t word, int from, int to) {
  return from <= to ? word << (to - from) : word >> (from - to);
}

// Q4_K's and Q5_K's head in the device layout (16 bytes): d and dmin, then sub-block j's 12-bit entry
// (scale | min << 6), its low 8 bits in byte 4 + j, its high 4 in nibble j of bytes 12-15. Gives
// d * scale and dmin * min of sub-block j.
__device__ __forceinline__ void k4_scale_min(const uint4& head, int j, float& scale, float& min) {
  const std::uint32_t low = (j < 4 ? head.y : head.z) >> (8 * (j % 4)) & 0xFFu;
  const std::uint32_t entry = low | (head.w >> (4 * j) & 0xFu) << 8;
  scale = half_bits_to_float(head.x & 0xFFFFu) * static_cast<float>(entry & 63u);
  min = half_bits_to_float(head.x >> 16) * static_cast<float>(entry >> 6);
}

template <class Block>
__device__ __forceinline__ const Block& block_at(const std::uint8_t* row, int block) {
  return reinterpret_cast<const Block*>(row)[block];
}

// Plain types: a 16-byte "block" of kRunLength elements; Bits::to_float converts one element's bits.
template <class Elem, class Bits>
struct PlainDecoder {
  static constexpr bool kPlain = true;
  static constexpr bool kHasBias = false;
  static constexpr bool kIntegerDot = false;
  static constexpr int kRuns = 1;
  static constexpr int kRunLength = 16 / sizeof(Elem);
  static constexpr int kBlockElems = kRunLength;
  static constexpr int kSlicesPerBlock = 1;
  static constexpr int kAlignment = 16;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const uint4 raw = load_16_bytes(row + 16 * slice);
    const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    constexpr int kPerWord = kRunLength / 4;
#pragma unroll
    for (int i = 0; i < kRunLength; ++i) {
      const std::uint32_t word = words[i / kPerWord];
      s.q[0][i] = Bits::to_float(kPerWord == 1 ? word : (word >> (16 * (i % kPerWord))) & 0xFFFFu);
    }
    s.scale[0] = 1.0f;
    s.column[0] = slice * kRunLength;
  }
  __device__ static float value(const std::uint8_t* row, int column) {
    return Bits::to_float(reinterpret_cast<const Elem*>(row)[column]);
  }
};

struct F32Bits {
  __device__ static float to_float(std::uint32_t bits) { return __uint_as_float(bits); }
};
struct F16Bits {
  __device__ static float to_float(std::uint32_t bits) { return half_bits_to_float(static_cast<unsigned short>(bits)); }
};
struct BF16Bits {
  __device__ static float to_float(std::uint32_t bits) { return __uint_as_float(bits << 16); }
};

}  // namespace detail

template <DType T>
struct Decoder;

template <>
struct Decoder<DType::F32> : detail::PlainDecoder<std::uint32_t, detail::F32Bits> {};
template <>
struct Decoder<DType::F16> : detail::PlainDecoder<std::uint16_t, detail::F16Bits> {};
template <>
struct Decoder<DType::BF16> : detail::PlainDecoder<std::uint16_t, detail::BF16Bits> {};

// Split rows (device_layout.h): each block's 32 quants, then each block's f16 scale d. 2 slices per
// block, each 16 consecutive quants: x = d * q.
template <>
struct Decoder<DType::Q8_0> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = false;
  static constexpr int kRuns = 1, kRunLength = 16, kBlockElems = 32, kSlicesPerBlock = 2, kAlignment = 2;
  static constexpr bool kIntegerDot = true, kUsesCodeSum = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;
  using Codes = gpu::Codes<2>;

  __device__ static void decode(const std::uint8_t* row, int row_blocks, int slice, Slice& s) {
    const uint4 raw = detail::load_16_bytes_any(row + 16 * slice);
#pragma unroll
    for (int i = 0; i < 16; ++i) s.q[0][i] = detail::byte_to_float(detail::word_of(raw, i / 4) ^ 0x80808080u, i % 4, 128.0f);
    s.scale[0] = scale(row, row_blocks, slice / kSlicesPerBlock);
    s.column[0] = 16 * slice;
  }
  __device__ static float scale(const std::uint8_t* row, int row_blocks, int block) {
    return detail::load_half(row + 32 * row_blocks + 2 * block);
  }
  // Units are blocks: row_units = row_blocks.
  __device__ static void load_codes(const std::uint8_t* row, int row_units, int unit, Codes& c) {
    c.q[0] = detail::load_16_bytes_any(row + 32 * unit);
    c.q[1] = detail::load_16_bytes_any(row + 32 * unit + 16);
    c.scale = scale(row, row_units, unit);
  }
  __device__ static float dot(const Codes& c, const int (&x)[8], int /*x_sum*/, float x_scale) {
    int sum = 0;
#pragma unroll
    for (int v = 0; v < 2; ++v) {
#pragma unroll
      for (int j = 0; j < 4; ++j) sum = dot4_i8(static_cast<int>(detail::word_of(c.q[v], j)), x[4 * v + j], sum);
    }
    return c.scale * x_scale * static_cast<float>(sum);
  }
  __device__ static int unit_word(const Codes& c, int half, int k) { return static_cast<int>(detail::word_of(c.q[half], k)); }
  __device__ static float unit_scale(const Codes& c, int /*half*/) { return c.scale; }
  __device__ static float unit_offset(const Codes& /*c*/) { return 0.0f; }
};

// Split rows (device_layout.h): each block's 16 bytes of nibbles, then each block's f16 scale d. One
// slice per block: byte i holds element i (low nibble) and element 16 + i (high); x = d * (q - 8).
template <>
struct Decoder<DType::Q4_0> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = false;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 32, kSlicesPerBlock = 1, kAlignment = 2;
  static constexpr bool kIntegerDot = true, kUsesCodeSum = true;
  using Slice = gpu::Slice<kRuns, kRunLength>;
  using Codes = gpu::Codes<1>;

  __device__ static void decode(const std::uint8_t* row, int row_blocks, int slice, Slice& s) {
    Codes c;
    load_codes(row, row_blocks, slice, c);
    detail::nibble_values(c.q[0], 8.0f, s);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s.scale[r] = c.scale;
      s.column[r] = kBlockElems * slice + 16 * r;
    }
  }
  // Units are blocks: row_units = row_blocks.
  __device__ static void load_codes(const std::uint8_t* row, int row_units, int unit, Codes& c) {
    c.q[0] = detail::load_16_bytes_any(row + 16 * unit);
    c.scale = detail::load_half(row + 16 * row_units + 2 * unit);
  }
  // sum (q - 8) x: the nibbles' products less 8 times x's code sum.
  __device__ static float dot(const Codes& c, const int (&x)[8], int x_sum, float x_scale) {
    return c.scale * x_scale * static_cast<float>(detail::dot_nibbles(c.q[0], x) - 8 * x_sum);
  }
  __device__ static int unit_word(const Codes& c, int half, int k) { return detail::nibble_word(c.q[0], half, k); }
  __device__ static float unit_scale(const Codes& c, int /*half*/) { return c.scale; }
  __device__ static float unit_offset(const Codes& c) { return 8.0f * c.scale; }
};

namespace detail {

// What Q4_K and Q5_K share: 256-column blocks of 8 units of 32 columns, one slice a unit, whose unsigned
// codes q (D::unit_word) take the unit's sub-block's scale and min (D::Codes' scale and min, from
// k4_scale_min): x = scale * q - min.
template <class D>
struct ScaledUnitsLessMin {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = true;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 8, kAlignment = 16;
  static constexpr bool kIntegerDot = true, kUsesCodeSum = true;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  template <class Codes>
  __device__ static float dot(const Codes& c, const int (&x)[8], int x_sum, float x_scale) {
    int sum = 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int k = 0; k < 4; ++k) sum = dot4_i8(D::unit_word(c, half, k), x[4 * half + k], sum);
    }
    return x_scale * (c.scale * static_cast<float>(sum) - c.min * static_cast<float>(x_sum));
  }
  template <class Codes>
  __device__ static float unit_scale(const Codes& c, int /*half*/) { return c.scale; }
  template <class Codes>
  __device__ static float unit_offset(const Codes& c) { return c.min; }
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    typename D::Codes c;
    D::load_codes(row, 0, slice, c);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s.q[half][i] = byte_to_float(static_cast<std::uint32_t>(D::unit_word(c, half, i / 4)), i % 4, 0.0f);
      s.scale[half] = c.scale;
      s.bias[half] = -c.min;
      s.column[half] = 32 * slice + 16 * half;
    }
  }
};

}  // namespace detail

// Q4_K in its device layout (device_layout.h): GGML's 144-byte blocks, each a 16-byte head (d, dmin
// and the sub-blocks' scales and mins, as detail::k4_scale_min reads them) then 8 units of 16 bytes of
// nibbles. Unit j holds sub-block j's 32 elements as Q4_0 does: byte i holds element i (low nibble)
// and element 16 + i (high). x = d * scale * q - dmin * min.
template <>
struct Decoder<DType::Q4_K> : detail::ScaledUnitsLessMin<Decoder<DType::Q4_K>> {
  struct Codes {
    uint4 q;
    float scale, min;  // d * scale and dmin * min of the unit's sub-block
  };

  // Unit u (32 columns) of a row: its nibbles and its sub-block's scale and min.
  __device__ static void load_codes(const std::uint8_t* row, int /*row_units*/, int unit, Codes& c) {
    static_assert(sizeof(cpu::BlockQ4_K) == 144 && offsetof(cpu::BlockQ4_K, qs) == 16);
    const std::uint8_t* block = row + 144 * (unit / 8);
    const int j = unit % 8;
    c.q = detail::load_16_bytes(block + 16 + 16 * j);
    detail::k4_scale_min(detail::load_16_bytes(block), j, c.scale, c.min);
  }
  __device__ static int unit_word(const Codes& c, int half, int k) { return detail::nibble_word(c.q, half, k); }
};

// Q5_K in its device layout (device_layout.h): Q4_K's, with each unit's fifth bits after the units: a
// 176-byte block holds Q4_K's head, unit j's low 4 bits at 16 + 16j as Q4_K's, and its fifth bits at
// 144 + 4j as a word whose bit 8b + 4h + k is that of element 16h + 4k + b, so that one shift and mask
// put four elements' fifth bits at bit 4 of their bytes. x = d * scale * q - dmin * min.
template <>
struct Decoder<DType::Q5_K> : detail::ScaledUnitsLessMin<Decoder<DType::Q5_K>> {
  struct Codes {
    uint4 low;
    std::uint32_t high;
    float scale, min;  // d * scale and dmin * min of the unit's sub-block
  };

  __device__ static void load_codes(const std::uint8_t* row, int /*row_units*/, int unit, Codes& c) {
    static_assert(sizeof(cpu::BlockQ5_K) == 176);
    const std::uint8_t* block = row + 176 * (unit / 8);
    const int j = unit % 8;
    c.low = detail::load_16_bytes(block + 16 + 16 * j);
    c.high = detail::load_word(block + 144 + 4 * j);
    detail::k4_scale_min(detail::load_16_bytes(block), j, c.scale, c.min);
  }
  // The codes q of elements 16 half + 4k + [0, 4), one a byte.
  __device__ static int unit_word(const Codes& c, int half, int k) {
    const std::uint32_t fifth = detail::shift_bits(c.high, 4 * half + k, 4) & 0x10101010u;
    return detail::nibble_word(c.low, half, k) | static_cast<int>(fifth);
  }
};

// Q6_K in its device layout (device_layout.h): a row's blocks split into four runs. First each
// 32-column unit's low 4 bits, 16 bytes as Q4_0's nibbles (byte i: element i, element 16 + i); then
// each unit's high 2 bits, 8 bytes: bits 2k of byte b of its first word are those of element 4k + b,
// of its second word those of element 16 + 4k + b; then each unit's two int8 scales (elements 0-15,
// 16-31); then each block's f16 d. One slice per unit; x = d * scale * (q - 32).
template <>
struct Decoder<DType::Q6_K> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = false;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 8, kAlignment = 2;
  static constexpr bool kIntegerDot = true, kUsesCodeSum = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;
  struct Codes {
    uint4 low;
    uint2 high;
    int scale[2];
    float d;
  };

  // row_units: the row's 32-column units, which place the runs after the first.
  __device__ static void load_codes(const std::uint8_t* row, int row_units, int unit, Codes& c) {
    c.low = detail::load_16_bytes_any(row + 16 * unit);
    c.high = detail::load_8_bytes_any(row + 16 * row_units + 8 * unit);
    const std::uint32_t scales = *reinterpret_cast<const std::uint16_t*>(row + 24 * row_units + 2 * unit);
    c.scale[0] = static_cast<signed char>(scales & 0xFFu);
    c.scale[1] = static_cast<signed char>(scales >> 8);
    c.d = detail::load_half(row + 26 * row_units + 2 * (unit / 8));
  }
  // The codes q of elements 4k + [0, 4) (half 0) or 16 + 4k + [0, 4) (half 1), one a byte.
  __device__ static std::uint32_t codes(const Codes& c, int half, int k) {
    const std::uint32_t low = detail::word_of(c.low, k) >> (4 * half) & 0x0F0F0F0Fu;
    const std::uint32_t high_word = half == 0 ? c.high.x : c.high.y;
    const std::uint32_t high = detail::shift_bits(high_word, 2 * k, 4) & 0x30303030u;
    return low | high;
  }
  // The same as q - 32 in two's complement: q + 96 fits each byte (q < 64), and flipping its top bit
  // subtracts 128.
  __device__ static int centred_codes(const Codes& c, int half, int k) {
    return static_cast<int>((codes(c, half, k) + 0x60606060u) ^ 0x80808080u);
  }
  __device__ static float dot(const Codes& c, const int (&x)[8], int /*x_sum*/, float x_scale) {
    int sums[2] = {0, 0};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int k = 0; k < 4; ++k) sums[half] = dot4_i8(centred_codes(c, half, k), x[4 * half + k], sums[half]);
    }
    return x_scale * c.d * static_cast<float>(c.scale[0] * sums[0] + c.scale[1] * sums[1]);
  }
  __device__ static int unit_word(const Codes& c, int half, int k) { return centred_codes(c, half, k); }
  __device__ static float unit_scale(const Codes& c, int half) { return c.d * static_cast<float>(c.scale[half]); }
  __device__ static float unit_offset(const Codes& /*c*/) { return 0.0f; }
  // row_blocks: the row's 256-column blocks.
  __device__ static void decode(const std::uint8_t* row, int row_blocks, int slice, Slice& s) {
    Codes c;
    load_codes(row, 8 * row_blocks, slice, c);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s.q[half][i] = detail::byte_to_float(codes(c, half, i / 4), i % 4, 32.0f);
      s.scale[half] = c.d * static_cast<float>(c.scale[half]);
      s.column[half] = 32 * slice + 16 * half;
    }
  }
};

// ---- GGML's other block types: the fp32 decode path only (no integer dot products) ----

namespace detail {

// f(run, i, nibble) for the 32 nibbles of a block of GGML's 32-element types, 16 bytes as 4 words:
// element i < 16 is the low nibble of byte i (run 0), element 16 + i its high nibble (run 1).
template <class F>
__device__ __forceinline__ void for_each_nibble(const std::uint32_t (&words)[4], F&& f) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t byte = byte_of(words[i / 4], i % 4);
    f(0, i, byte & 0xFu);
    f(1, i, byte >> 4);
  }
}

// cpu::kIq4Values[n] for a 4-bit code n: the table's 16 int8 values are four little-endian words, and a
// byte permute picks byte n % 8 of the half that n / 8 names.
__device__ __forceinline__ float iq4_value(std::uint32_t n) {
  constexpr std::uint32_t k0 = 0xBFAD9881u, k1 = 0xF6EADDCFu, k2 = 0x26190D01u, k3 = 0x71594535u;
  const std::uint32_t picked = n & 8 ? __byte_perm(k2, k3, n & 7) : __byte_perm(k0, k1, n & 7);
  return static_cast<float>(static_cast<std::int8_t>(picked & 0xFFu));
}

// GGML's 32-element blocks as stored, a slice a block: two runs of 16 columns, elements 0-15 and 16-31.
template <bool kBias, int kAlign>
struct Block32Decoder {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = kBias;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 32, kSlicesPerBlock = 1, kAlignment = kAlign;
  static constexpr bool kIntegerDot = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  // The runs' scale d, bias m and columns.
  __device__ static void set_runs(int block, float d, float m, Slice& s) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s.scale[r] = d;
      s.bias[r] = m;
      s.column[r] = 32 * block + 16 * r;
    }
  }
};

}  // namespace detail

// The words in iq4_value are cpu::kIq4Values, byte for byte.
static_assert([] {
  for (int i = 0; i < 16; ++i) {
    constexpr std::uint32_t kWords[4] = {0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u};
    if (static_cast<std::int8_t>((kWords[i / 4] >> (8 * (i % 4))) & 0xFFu) != cpu::kIq4Values[i]) return false;
  }
  return true;
}());

// GGML's blocks as stored, 20 bytes (4-byte aligned): d and m, then Q4_0's nibbles; x = d * q + m.
template <>
struct Decoder<DType::Q4_1> : detail::Block32Decoder<true, 4> {
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const std::uint8_t* block = row + sizeof(cpu::BlockQ4_1) * slice;
    static_assert(offsetof(cpu::BlockQ4_1, qs) == 4);
    const std::uint32_t head = detail::load_word(block);
    const std::uint32_t words[4] = {detail::load_word(block + 4), detail::load_word(block + 8),
                                    detail::load_word(block + 12), detail::load_word(block + 16)};
    detail::for_each_nibble(words, [&](int r, int i, std::uint32_t n) { s.q[r][i] = detail::code_to_float(n, 0.0f); });
    set_runs(slice, half_bits_to_float(head & 0xFFFFu), half_bits_to_float(head >> 16), s);
  }
};

// GGML's blocks as stored, 22 bytes (2-byte aligned): d, the fifth bits (bit j: element j), then Q4_0's
// nibbles; x = d * (q - 16).
template <>
struct Decoder<DType::Q5_0> : detail::Block32Decoder<false, 2> {
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const std::uint8_t* block = row + sizeof(cpu::BlockQ5_0) * slice;
    static_assert(offsetof(cpu::BlockQ5_0, qh) == 2 && offsetof(cpu::BlockQ5_0, qs) == 6);
    const std::uint32_t high = detail::load_4_bytes(block + 2);
    const std::uint32_t words[4] = {detail::load_4_bytes(block + 6), detail::load_4_bytes(block + 10),
                                    detail::load_4_bytes(block + 14), detail::load_4_bytes(block + 18)};
    detail::for_each_nibble(words, [&](int r, int i, std::uint32_t n) {
      s.q[r][i] = detail::code_to_float(n | ((high >> (16 * r + i)) & 1u) << 4, 16.0f);
    });
    set_runs(slice, detail::load_half(block), 0.0f, s);
  }
};

// GGML's blocks as stored, 24 bytes (4-byte aligned): d and m, the fifth bits, the nibbles; x = d * q + m.
template <>
struct Decoder<DType::Q5_1> : detail::Block32Decoder<true, 4> {
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const std::uint8_t* block = row + sizeof(cpu::BlockQ5_1) * slice;
    static_assert(offsetof(cpu::BlockQ5_1, qh) == 4 && offsetof(cpu::BlockQ5_1, qs) == 8);
    const std::uint32_t head = detail::load_word(block), high = detail::load_word(block + 4);
    const std::uint32_t words[4] = {detail::load_word(block + 8), detail::load_word(block + 12),
                                    detail::load_word(block + 16), detail::load_word(block + 20)};
    detail::for_each_nibble(words, [&](int r, int i, std::uint32_t n) {
      s.q[r][i] = detail::code_to_float(n | ((high >> (16 * r + i)) & 1u) << 4, 0.0f);
    });
    set_runs(slice, half_bits_to_float(head & 0xFFFFu), half_bits_to_float(head >> 16), s);
  }
};

// GGML's blocks as stored, 18 bytes (2-byte aligned): d, then the codes as Q4_0's nibbles;
// x = d * kIq4Values[code].
template <>
struct Decoder<DType::IQ4_NL> : detail::Block32Decoder<false, 2> {
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const std::uint8_t* block = row + sizeof(cpu::BlockIQ4_NL) * slice;
    static_assert(offsetof(cpu::BlockIQ4_NL, qs) == 2);
    const std::uint32_t words[4] = {detail::load_4_bytes(block + 2), detail::load_4_bytes(block + 6),
                                    detail::load_4_bytes(block + 10), detail::load_4_bytes(block + 14)};
    detail::for_each_nibble(words, [&](int r, int i, std::uint32_t n) { s.q[r][i] = detail::iq4_value(n); });
    set_runs(slice, detail::load_half(block), 0.0f, s);
  }
};

// 8 slices per block (136 bytes, 8-byte aligned), slice c the 32 elements of sub-block c from
// qs[16c, +16) as IQ4_NL's codes; x = d * (s[c] - 32) * kIq4Values[code], s[c] the 6-bit scale whose
// low 4 bits are nibble c of scales_l and high 2 bits field c of scales_h.
template <>
struct Decoder<DType::IQ4_XS> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = false;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 8, kAlignment = 8;
  static constexpr bool kIntegerDot = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const int c = slice % kSlicesPerBlock;
    const std::uint8_t* block = row + sizeof(cpu::BlockIQ4_XS) * (slice / kSlicesPerBlock);
    static_assert(offsetof(cpu::BlockIQ4_XS, scales_l) == 4 && offsetof(cpu::BlockIQ4_XS, qs) == 8);
    const uint2 head = *reinterpret_cast<const uint2*>(block);  // d, scales_h, scales_l
    const uint2 first = *reinterpret_cast<const uint2*>(block + 8 + 16 * c);  // qs[16c, +8), then [+8, +16)
    const uint2 second = *reinterpret_cast<const uint2*>(block + 16 + 16 * c);
    const std::uint32_t words[4] = {first.x, first.y, second.x, second.y};
    detail::for_each_nibble(words, [&](int r, int i, std::uint32_t n) { s.q[r][i] = detail::iq4_value(n); });
    const std::uint32_t scale_bits = ((head.y >> (4 * c)) & 0xFu) | ((head.x >> (16 + 2 * c)) & 3u) << 4;
    const float d = half_bits_to_float(head.x & 0xFFFFu) * detail::code_to_float(scale_bits, 32.0f);
    detail::Block32Decoder<false, kAlignment>::set_runs(slice, d, 0.0f, s);  // 32 columns a slice, as those
  }
};

// 4 slices per block (84 bytes, 4-byte aligned): slice p = 2h + j takes the 16 bytes qs[32h + 16j, +16),
// whose 2-bit fields k < 4 are elements 128h + 32k + 16j + [0, 16): run k, group 8h + 2k + j of 16;
// x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4).
template <>
struct Decoder<DType::Q2_K> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = true;
  static constexpr int kRuns = 4, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 4, kAlignment = 4;
  static constexpr bool kIntegerDot = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const int part = slice % kSlicesPerBlock, h = part / 2, j = part % 2;
    const std::uint8_t* block = row + sizeof(cpu::BlockQ2_K) * (slice / kSlicesPerBlock);
    static_assert(offsetof(cpu::BlockQ2_K, qs) == 16 && offsetof(cpu::BlockQ2_K, d) == 80);
    const std::uint8_t* qs = block + 16 + 32 * h + 16 * j;
    const std::uint32_t codes[4] = {detail::load_word(qs), detail::load_word(qs + 4), detail::load_word(qs + 8),
                                    detail::load_word(qs + 12)};
    const std::uint32_t scales[2] = {detail::load_word(block + 8 * h), detail::load_word(block + 8 * h + 4)};
    const std::uint32_t dm = detail::load_word(block + 80);
    const float d = half_bits_to_float(dm & 0xFFFFu), dmin = half_bits_to_float(dm >> 16);
    const int first = slice / kSlicesPerBlock * kBlockElems + 128 * h + 16 * j;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s.q[k][i] = detail::code_to_float((detail::byte_of(codes[i / 4], i % 4) >> (2 * k)) & 3u, 0.0f);
      const std::uint32_t sc = detail::byte_of(scales[k / 2], 2 * (k % 2) + j);
      s.scale[k] = d * static_cast<float>(sc & 0xFu);
      s.bias[k] = -dmin * static_cast<float>(sc >> 4);
      s.column[k] = first + 32 * k;
    }
  }
};

// 4 slices per block (110 bytes, 2-byte aligned), as Q2_K's: slice p = 2h + j, run k the elements
// 128h + 32k + 16j + [0, 16) of group g = 8h + 2k + j, each (qs[32h + 16j + i] >> 2k) & 3, less 4 unless
// bit 4h + k of hmask[16j + i] is set; x = d * (s[g] - 32) * q, with s unpacked as
// cpu::unpack_scales_q3_k does.
template <>
struct Decoder<DType::Q3_K> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = false;
  static constexpr int kRuns = 4, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 4, kAlignment = 2;
  static constexpr bool kIntegerDot = false;
  using Slice = gpu::Slice<kRuns, kRunLength>;

  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    const int part = slice % kSlicesPerBlock, h = part / 2, j = part % 2;
    const std::uint8_t* block = row + sizeof(cpu::BlockQ3_K) * (slice / kSlicesPerBlock);
    static_assert(offsetof(cpu::BlockQ3_K, qs) == 32 && offsetof(cpu::BlockQ3_K, scales) == 96 &&
                  offsetof(cpu::BlockQ3_K, d) == 108);
    const uint4 low_raw = detail::load_16_bytes_any(block + 32 + 32 * h + 16 * j);
    const uint4 high_raw = detail::load_16_bytes_any(block + 16 * j);
    const std::uint32_t low[4] = {low_raw.x, low_raw.y, low_raw.z, low_raw.w};
    const std::uint32_t high[4] = {high_raw.x, high_raw.y, high_raw.z, high_raw.w};
    const std::uint32_t packed[3] = {detail::load_4_bytes(block + 96), detail::load_4_bytes(block + 100),
                                     detail::load_4_bytes(block + 104)};
    const float d = detail::load_half(block + 108);
    const int first = slice / kSlicesPerBlock * kBlockElems + 128 * h + 16 * j;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const std::uint32_t low2 = (detail::byte_of(low[i / 4], i % 4) >> (2 * k)) & 3u;
        const std::uint32_t bit = (detail::byte_of(high[i / 4], i % 4) >> (4 * h + k)) & 1u;
        s.q[k][i] = detail::code_to_float(low2 | bit << 2, 4.0f);
      }
      const int g = 8 * h + 2 * k + j;
      const std::uint32_t low4 = (detail::byte_of(packed[(g % 8) / 4], g % 4) >> (4 * (g / 8))) & 0xFu;
      const std::uint32_t high2 = (detail::byte_of(packed[2], g % 4) >> (2 * (g / 4))) & 3u;
      s.scale[k] = d * detail::code_to_float(low4 | high2 << 4, 32.0f);
      s.column[k] = first + 32 * k;
    }
  }
};

// Calls f(Decoder<type>{}): turns a run-time type into a kernel's template argument.
template <class F>
void with_decoder(DType type, F&& f) {
  switch (type) {
    case DType::F32: return f(Decoder<DType::F32>{});
    case DType::F16: return f(Decoder<DType::F16>{});
    case DType::BF16: return f(Decoder<DType::BF16>{});
    case DType::Q8_0: return f(Decoder<DType::Q8_0>{});
    case DType::Q4_0: return f(Decoder<DType::Q4_0>{});
    case DType::Q4_K: return f(Decoder<DType::Q4_K>{});
    case DType::Q6_K: return f(Decoder<DType::Q6_K>{});
    case DType::Q4_1: return f(Decoder<DType::Q4_1>{});
    case DType::Q5_0: return f(Decoder<DType::Q5_0>{});
    case DType::Q5_1: return f(Decoder<DType::Q5_1>{});
    case DType::Q2_K: return f(Decoder<DType::Q2_K>{});
    case DType::Q3_K: return f(Decoder<DType::Q3_K>{});
    case DType::Q5_K: return f(Decoder<DType::Q5_K>{});
    case DType::IQ4_NL: return f(Decoder<DType::IQ4_NL>{});
    case DType::IQ4_XS: return f(Decoder<DType::IQ4_XS>{});
    case DType::F64:
    case DType::I32:
    case DType::I64: break;
  }
  throw_bad_launch("with_decoder", "unknown weight type");
}

// How many slices of each row of `rows_data` (rows of `cols` columns) decode() reads; the columns past
// them, in plain types only, go through value(). Throws when a quantized row cannot be read: its
// length is not a whole number of blocks, or the data is misaligned for the decoder's loads.
template <class D>
int decodable_slices(const void* rows_data, int cols, const char* launch) {
  const bool whole_blocks = cols % D::kBlockElems == 0;
  const bool aligned = is_aligned(rows_data, D::kAlignment);
  if constexpr (!D::kPlain) {
    require(whole_blocks, launch, "row length is not a whole number of quantization blocks");
    require(aligned, launch, "weights are not aligned for the block loads");
  }
  return whole_blocks && aligned ? cols / D::kBlockElems * D::kSlicesPerBlock : 0;
}

}  // namespace rf::gpu
