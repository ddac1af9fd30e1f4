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
// field each (a row's quants first, 16 bytes a unit), Q4_K's blocks rearranged in place, so that a
// unit's quants are one 16-byte load and its codes line up with x's for dp4a. GGML's 18-, 34- and
// 210-byte blocks would allow 2-byte loads only.
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
  for (int i = 0; i < 16; ++i) {
    s.q[0][i] = byte_to_float(word_of(q, i / 4) & 0x0F0F0F0Fu, i % 4, offset);
    s.q[1][i] = byte_to_float((word_of(q, i / 4) >> 4) & 0x0F0F0F0Fu, i % 4, offset);
  }
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

// Q4_K in its device layout (device_layout.h): GGML's 144-byte blocks, each 16 bytes of scales then 8
// units of 16 bytes of nibbles. The head holds d and dmin (f16), then sub-block j's 6-bit scale and
// min as one 12-bit entry (scale | min << 6): its low 8 bits in byte 4 + j, its high 4 in nibble j of
// bytes 12-15. Unit j holds sub-block j's 32 elements as Q4_0 does: byte i holds element i (low
// nibble) and element 16 + i (high). One slice per unit; x = d * scale * q - dmin * min.
template <>
struct Decoder<DType::Q4_K> {
  static constexpr bool kPlain = false;
  static constexpr bool kHasBias = true;
  static constexpr int kRuns = 2, kRunLength = 16, kBlockElems = 256, kSlicesPerBlock = 8, kAlignment = 16;
  static constexpr bool kIntegerDot = true, kUsesCodeSum = true;
  using Slice = gpu::Slice<kRuns, kRunLength>;
  struct Codes {
    uint4 q;
    float scale, min;  // d * scale and dmin * min of the unit's sub-block
  };

  // Unit u (32 columns) of a row: its nibbles and its sub-block's scale and min.
  __device__ static void load_codes(const std::uint8_t* row, int /*row_units*/, int unit, Codes& c) {
    static_assert(sizeof(cpu::BlockQ4_K) == 144 && offsetof(cpu::BlockQ4_K, qs) == 16);
    const std::uint8_t* block = row + 144 * (unit / 8);
    const int j = unit % 8;
    const uint4 head = detail::load_16_bytes(block);
    c.q = detail::load_16_bytes(block + 16 + 16 * j);
    const std::uint32_t low = (j < 4 ? head.y : head.z) >> (8 * (j % 4)) & 0xFFu;
    const std::uint32_t entry = low | (head.w >> (4 * j) & 0xFu) << 8;
    c.scale = half_bits_to_float(head.x & 0xFFFFu) * static_cast<float>(entry & 63u);
    c.min = half_bits_to_float(head.x >> 16) * static_cast<float>(entry >> 6);
  }
  __device__ static float dot(const Codes& c, const int (&x)[8], int x_sum, float x_scale) {
    return x_scale * (c.scale * static_cast<float>(detail::dot_nibbles(c.q, x)) - c.min * static_cast<float>(x_sum));
  }
  __device__ static int unit_word(const Codes& c, int half, int k) { return detail::nibble_word(c.q, half, k); }
  __device__ static float unit_scale(const Codes& c, int /*half*/) { return c.scale; }
  __device__ static float unit_offset(const Codes& c) { return c.min; }
  __device__ static void decode(const std::uint8_t* row, int /*row_blocks*/, int slice, Slice& s) {
    Codes c;
    load_codes(row, 0, slice, c);
    detail::nibble_values(c.q, 0.0f, s);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      s.scale[r] = c.scale;
      s.bias[r] = -c.min;
      s.column[r] = 32 * slice + 16 * r;
    }
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
    const std::uint32_t high = (2 * k <= 4 ? high_word << (4 - 2 * k) : high_word >> (2 * k - 4)) & 0x30303030u;
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
