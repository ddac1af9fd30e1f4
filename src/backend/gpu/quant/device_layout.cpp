#include "backend/gpu/quant/device_layout.h"

#include <cstring>
#include <vector>

#include "backend/cpu/block_formats.h"

namespace rf::gpu {

namespace {

// Bytes of row r of `host`, and where its device copy goes in `out`.
struct RowBytes {
  const std::uint8_t* in;
  std::uint8_t* out;
};
RowBytes row_at(const WeightMatrix& host, std::uint8_t* out, std::size_t r) {
  const std::size_t stride = row_bytes(host.dtype, host.cols);
  return {static_cast<const std::uint8_t*>(host.data) + r * stride, out + r * stride};
}

std::size_t row_blocks(const WeightMatrix& host) { return host.cols / dtype_info(host.dtype).block_elems; }

// Q8_0, Q4_0: each row's quants, then its f16 block scales.
template <class Block>
void split_rows(const WeightMatrix& host, std::uint8_t* out) {
  constexpr std::size_t kQuantBytes = sizeof(Block::qs);
  const std::size_t blocks = row_blocks(host);
  for (std::size_t r = 0; r < host.rows; ++r) {
    const auto [in_bytes, quants] = row_at(host, out, r);
    const auto* in = reinterpret_cast<const Block*>(in_bytes);
    std::uint8_t* scales = quants + blocks * kQuantBytes;
    for (std::size_t b = 0; b < blocks; ++b) {
      std::memcpy(quants + b * kQuantBytes, in[b].qs, kQuantBytes);
      std::memcpy(scales + b * sizeof(in[b].d), &in[b].d, sizeof(in[b].d));
    }
  }
}

// 16 bytes of nibbles from two runs of 16 bytes holding 4-bit codes at bit `shift` of each byte: byte i
// takes code i of `first` (low nibble) and code i of `second` (high), as Decoder<Q4_0> reads them.
// Eight bytes a step.
void pack_nibbles(const std::uint8_t* first, const std::uint8_t* second, int shift, std::uint8_t* out) {
  constexpr std::uint64_t kLow = 0x0F0F0F0F0F0F0F0Full;
  for (int i = 0; i < 16; i += 8) {
    std::uint64_t a, b;
    std::memcpy(&a, first + i, 8);
    std::memcpy(&b, second + i, 8);
    const std::uint64_t packed = (a >> shift & kLow) | (b >> shift & kLow) << 4;
    std::memcpy(out + i, &packed, 8);
  }
}

// Q4_K's and Q5_K's head (16 bytes at `out`): d and dmin; sub-block j's scale | min << 6 as its low
// byte at 4 + j and its high nibble at nibble j of bytes 12-15 (dequantize.cuh's detail::k4_scale_min
// reads this).
void write_k4_head(std::uint16_t d, std::uint16_t dmin, const std::uint8_t* packed_scales, std::uint8_t* out) {
  std::memset(out, 0, 16);
  std::memcpy(out, &d, 2);
  std::memcpy(out + 2, &dmin, 2);
  std::uint64_t scales, mins;
  cpu::unpack_scale_min_k4(packed_scales, scales, mins);
  for (int j = 0; j < 8; ++j) {
    const unsigned entry = (scales >> (8 * j) & 63) | (mins >> (8 * j) & 63) << 6;
    out[4 + j] = static_cast<std::uint8_t>(entry & 0xFF);
    out[12 + j / 2] |= static_cast<std::uint8_t>((entry >> 8) << (4 * (j % 2)));
  }
}

// Sub-block j's 32 low 4-bit codes, packed by pack_nibbles: GGML keeps sub-block j in the low (j
// even) or high (j odd) nibbles of qs[32(j / 2), +32), in Q4_K and Q5_K alike.
void pack_k4_unit(const std::uint8_t* qs, int j, std::uint8_t* out) {
  const std::uint8_t* codes = qs + 32 * (j / 2);
  pack_nibbles(codes, codes + 16, 4 * (j % 2), out);
}

// Q4_K, block by block in place: the head, then sub-block j's codes at 16 + 16j (dequantize.cuh's
// Decoder<Q4_K> reads this).
void arrange_q4_k(const WeightMatrix& host, std::uint8_t* out) {
  const std::size_t blocks = host.rows * row_blocks(host);
  const auto* in = static_cast<const cpu::BlockQ4_K*>(host.data);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* block = out + b * sizeof(cpu::BlockQ4_K);
    write_k4_head(in[b].d, in[b].dmin, in[b].scales, block);
    for (int j = 0; j < 8; ++j) pack_k4_unit(in[b].qs, j, block + 16 + 16 * j);
  }
}

// Q5_K, block by block in place: Q4_K's layout, then sub-block j's fifth bits at 144 + 4j as a word
// whose bit 8b + 4h + k is that of element 16h + 4k + b (GGML keeps it as bit j of qh[16h + 4k + b]);
// dequantize.cuh's Decoder<Q5_K> reads this.
void arrange_q5_k(const WeightMatrix& host, std::uint8_t* out) {
  const std::size_t blocks = host.rows * row_blocks(host);
  const auto* in = static_cast<const cpu::BlockQ5_K*>(host.data);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* block = out + b * sizeof(cpu::BlockQ5_K);
    write_k4_head(in[b].d, in[b].dmin, in[b].scales, block);
    for (int j = 0; j < 8; ++j) {
      pack_k4_unit(in[b].qs, j, block + 16 + 16 * j);
      std::uint32_t fifth = 0;
      for (int e = 0; e < 32; ++e) {
        const int h = e / 16, k = e % 16 / 4, byte = e % 4;
        fifth |= static_cast<std::uint32_t>(in[b].qh[e] >> j & 1) << (8 * byte + 4 * h + k);
      }
      std::memcpy(block + 144 + 4 * j, &fifth, 4);
    }
  }
}

// Q6_K, row by row: each 32-column unit's low 4 bits (by pack_nibbles), then each unit's high 2 bits (8
// bytes: bits 2k of byte b of word h are those of element 16h + 4k + b), then each unit's two int8
// scales, then each block's f16 d (dequantize.cuh's Decoder<Q6_K> reads this).
void split_q6_k(const WeightMatrix& host, std::uint8_t* out) {
  const std::size_t blocks = row_blocks(host), units = 8 * blocks;
  for (std::size_t r = 0; r < host.rows; ++r) {
    const auto [in_bytes, low] = row_at(host, out, r);
    const auto* in = reinterpret_cast<const cpu::BlockQ6_K*>(in_bytes);
    std::uint8_t* high = low + 16 * units;
    std::uint8_t* scales = low + 24 * units;
    std::uint8_t* d = low + 26 * units;
    for (std::size_t b = 0; b < blocks; ++b) {
      for (int j = 0; j < 8; ++j) {
        const std::size_t unit = 8 * b + j;
        const int h = j / 4, k = j % 4;  // elements 128h + 32k + l
        const std::uint8_t* codes = in[b].ql + 64 * h + 32 * (k % 2);
        pack_nibbles(codes, codes + 16, 4 * (k / 2), low + 16 * unit);
        for (int word = 0; word < 2; ++word) {
          std::uint32_t packed = 0;
          for (int group = 0; group < 4; ++group) {  // elements 16 word + 4 group + [0, 4)
            std::uint32_t bits;
            std::memcpy(&bits, in[b].qh + 32 * h + 16 * word + 4 * group, 4);
            packed |= (bits >> (2 * k) & 0x03030303u) << (2 * group);
          }
          std::memcpy(high + 8 * unit + 4 * word, &packed, 4);
        }
        std::memcpy(scales + 2 * unit, in[b].scales + 2 * j, 2);
      }
      std::memcpy(d + 2 * b, &in[b].d, 2);
    }
  }
}

bool is_rearranged(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q5_K ||
         type == DType::Q6_K;
}

}  // namespace

std::vector<std::uint8_t> to_device_layout(const WeightMatrix& host) {
  const auto* bytes = static_cast<const std::uint8_t*>(host.data);
  std::vector<std::uint8_t> out(bytes, bytes + host.bytes());
  if (host.dtype == DType::Q8_0) split_rows<cpu::BlockQ8_0>(host, out.data());
  if (host.dtype == DType::Q4_0) split_rows<cpu::BlockQ4_0>(host, out.data());
  if (host.dtype == DType::Q4_K) arrange_q4_k(host, out.data());
  if (host.dtype == DType::Q5_K) arrange_q5_k(host, out.data());
  if (host.dtype == DType::Q6_K) split_q6_k(host, out.data());
  return out;
}

DeviceBuffer<std::uint8_t> upload_weights(const WeightMatrix& host) {
  DeviceBuffer<std::uint8_t> device(host.bytes());
  upload_weights(host, device.data());
  return device;
}

void upload_weights(const WeightMatrix& host, std::uint8_t* device) {
  const std::size_t bytes = host.bytes();
  if (bytes == 0) return;
  if (is_rearranged(host.dtype)) {
    const std::vector<std::uint8_t> laid_out = to_device_layout(host);
    RF_GPU_CHECK(gpuMemcpy(device, laid_out.data(), bytes, gpuMemcpyHostToDevice));
  } else {
    RF_GPU_CHECK(gpuMemcpy(device, host.data, bytes, gpuMemcpyHostToDevice));
  }
}

}  // namespace rf::gpu
