// Decoding of hand-built blocks, checked against decoders written here from the GGML reference
// loops (dequantize_row_q4_K and friends) independently of the kernels' grouped formulation,
// and against a few values worked out by hand. Runs under every supported instruction set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cpu_test_helpers.h"

namespace rf::test {
namespace {

// Decoded values in double, and the size of the largest terms summed to make them (the fp32
// kernels may be off by a few ulps of that).
struct Reference {
  std::vector<double> x;
  double magnitude = 0;
  void add(double scaled, double min) {
    x.push_back(scaled - min);
    magnitude = std::max(magnitude, std::fabs(scaled) + std::fabs(min));
  }
};

Reference reference_q8_0(const cpu::BlockQ8_0& b) {
  Reference r;
  for (int j = 0; j < 32; ++j) r.add(f16_to_f32(b.d) * static_cast<double>(b.qs[j]), 0);
  return r;
}

Reference reference_q4_0(const cpu::BlockQ4_0& b) {
  Reference r;
  r.x.resize(32);
  const double d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    r.x[j] = d * ((b.qs[j] & 15) - 8);
    r.x[j + 16] = d * ((b.qs[j] >> 4) - 8);
  }
  for (double v : r.x) r.magnitude = std::max(r.magnitude, std::fabs(v));
  return r;
}

// get_scale_min_k4 as GGML writes it.
std::pair<int, int> scale_min(int j, const std::uint8_t* q) {
  if (j < 4) return {q[j] & 63, q[j + 4] & 63};
  return {(q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)};
}

// dequantize_row_q4_K: four chunks of 64, low nibbles then high nibbles of 32 bytes each.
Reference reference_q4_k(const cpu::BlockQ4_K& b) {
  Reference r;
  const double d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const std::uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2, q += 32) {
    const auto [sc1, m1] = scale_min(is, b.scales);
    const auto [sc2, m2] = scale_min(is + 1, b.scales);
    for (int l = 0; l < 32; ++l) r.add(d * sc1 * (q[l] & 0xF), dmin * m1);
    for (int l = 0; l < 32; ++l) r.add(d * sc2 * (q[l] >> 4), dmin * m2);
  }
  return r;
}

// dequantize_row_q6_K: two halves of 128, each element pieced together from ql and qh.
Reference reference_q6_k(const cpu::BlockQ6_K& b) {
  Reference r;
  r.x.resize(256);
  const double d = f16_to_f32(b.d);
  const std::uint8_t* ql = b.ql;
  const std::uint8_t* qh = b.qh;
  const std::int8_t* sc = b.scales;
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      r.x[n + l] = d * sc[is] * q1;
      r.x[n + l + 32] = d * sc[is + 2] * q2;
      r.x[n + l + 64] = d * sc[is + 4] * q3;
      r.x[n + l + 96] = d * sc[is + 6] * q4;
    }
  }
  for (double v : r.x) r.magnitude = std::max(r.magnitude, std::fabs(v));
  return r;
}

// dequantize_row_q4_1 and dequantize_row_q5_1 (with the fifth bit from qh).
Reference reference_q4_1(const cpu::BlockQ4_1& b) {
  Reference r;
  r.x.resize(32);
  const double d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < 16; ++j) {
    r.x[j] = (b.qs[j] & 0x0F) * d + m;
    r.x[j + 16] = (b.qs[j] >> 4) * d + m;
    r.magnitude = std::max({r.magnitude, std::fabs(15 * d) + std::fabs(m)});
  }
  return r;
}

Reference reference_q5_0(const cpu::BlockQ5_0& b) {
  Reference r;
  r.x.resize(32);
  const double d = f16_to_f32(b.d);
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < 16; ++j) {
    const int xh_0 = ((qh >> (j + 0)) << 4) & 0x10, xh_1 = ((qh >> (j + 12))) & 0x10;
    r.x[j] = (((b.qs[j] & 0x0F) | xh_0) - 16) * d;
    r.x[j + 16] = (((b.qs[j] >> 4) | xh_1) - 16) * d;
  }
  r.magnitude = 16 * std::fabs(d);
  return r;
}

Reference reference_q5_1(const cpu::BlockQ5_1& b) {
  Reference r;
  r.x.resize(32);
  const double d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < 16; ++j) {
    const int xh_0 = ((qh >> (j + 0)) << 4) & 0x10, xh_1 = ((qh >> (j + 12))) & 0x10;
    r.x[j] = ((b.qs[j] & 0x0F) | xh_0) * d + m;
    r.x[j + 16] = ((b.qs[j] >> 4) | xh_1) * d + m;
  }
  r.magnitude = 31 * std::fabs(d) + std::fabs(m);
  return r;
}

// dequantize_row_q2_K: two halves of 128, each 4 shifts of 32 bytes, 16 elements per scale.
Reference reference_q2_k(const cpu::BlockQ2_K& b) {
  Reference r;
  const double d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const std::uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t sc = b.scales[is++];
        for (int l = 0; l < 16; ++l) r.add(d * (sc & 0xF) * ((q[l + 16 * half] >> shift) & 3), dmin * (sc >> 4));
      }
    }
  }
  return r;
}

// dequantize_row_q3_K, its scales unpacked as GGML does (aux words and masks).
Reference reference_q3_k(const cpu::BlockQ3_K& b) {
  Reference r;
  std::uint32_t aux[4];
  std::memcpy(aux, b.scales, 12);
  const std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const double d = f16_to_f32(b.d);
  const std::uint8_t* q = b.qs;
  std::uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int half = 0; half < 2; ++half) {
        const double dl = d * (scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          r.add(dl * (((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4)), 0);
        }
      }
    }
  }
  return r;
}

// dequantize_row_q5_K: as Q4_K's chunks of 64, with bits u1, u2 of qh moving up two each chunk.
Reference reference_q5_k(const cpu::BlockQ5_K& b) {
  Reference r;
  const double d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  const std::uint8_t* ql = b.qs;
  int u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    const auto [sc1, m1] = scale_min(is, b.scales);
    const auto [sc2, m2] = scale_min(is + 1, b.scales);
    for (int l = 0; l < 32; ++l) r.add(d * sc1 * ((ql[l] & 0xF) + (b.qh[l] & u1 ? 16 : 0)), dmin * m1);
    for (int l = 0; l < 32; ++l) r.add(d * sc2 * ((ql[l] >> 4) + (b.qh[l] & u2 ? 16 : 0)), dmin * m2);
  }
  return r;
}

constexpr int kValuesIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// dequantize_row_iq4_nl and dequantize_row_iq4_xs.
Reference reference_iq4_nl(const cpu::BlockIQ4_NL& b) {
  Reference r;
  r.x.resize(32);
  const double d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    r.x[j] = d * kValuesIq4nl[b.qs[j] & 0xf];
    r.x[j + 16] = d * kValuesIq4nl[b.qs[j] >> 4];
  }
  r.magnitude = 127 * std::fabs(d);
  return r;
}

Reference reference_iq4_xs(const cpu::BlockIQ4_XS& b) {
  Reference r;
  r.x.resize(256);
  const double d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4);
    const double dl = d * (ls - 32);
    for (int j = 0; j < 16; ++j) {
      r.x[32 * ib + j] = dl * kValuesIq4nl[b.qs[16 * ib + j] & 0xf];
      r.x[32 * ib + j + 16] = dl * kValuesIq4nl[b.qs[16 * ib + j] >> 4];
    }
    r.magnitude = std::max(r.magnitude, 127 * std::fabs(dl));
  }
  return r;
}

template <class Block>
Reference reference_row(const std::vector<std::uint8_t>& row, Reference (*decode)(const Block&)) {
  Reference all;
  for (std::size_t off = 0; off < row.size(); off += sizeof(Block)) {
    Block b;
    std::memcpy(&b, row.data() + off, sizeof b);
    const Reference r = decode(b);
    all.x.insert(all.x.end(), r.x.begin(), r.x.end());
    all.magnitude = std::max(all.magnitude, r.magnitude);
  }
  return all;
}

Reference reference(DType type, const std::vector<std::uint8_t>& row) {
  switch (type) {
    case DType::Q8_0: return reference_row(row, reference_q8_0);
    case DType::Q4_0: return reference_row(row, reference_q4_0);
    case DType::Q4_K: return reference_row(row, reference_q4_k);
    case DType::Q6_K: return reference_row(row, reference_q6_k);
    case DType::Q4_1: return reference_row(row, reference_q4_1);
    case DType::Q5_0: return reference_row(row, reference_q5_0);
    case DType::Q5_1: return reference_row(row, reference_q5_1);
    case DType::Q2_K: return reference_row(row, reference_q2_k);
    case DType::Q3_K: return reference_row(row, reference_q3_k);
    case DType::Q5_K: return reference_row(row, reference_q5_k);
    case DType::IQ4_NL: return reference_row(row, reference_iq4_nl);
    case DType::IQ4_XS: return reference_row(row, reference_iq4_xs);
    default: break;
  }
  ADD_FAILURE() << "no reference decoder for " << dtype_name(type);
  return {};
}

template <class Block>
std::vector<std::uint8_t> bytes_of(const Block& b) {
  std::vector<std::uint8_t> v(sizeof b);
  std::memcpy(v.data(), &b, sizeof b);
  return v;
}

// dequantize_row and dot_row (against unit vectors: each picks one element) under every ISA.
void expect_decodes_to(DType type, const std::vector<std::uint8_t>& row, const Reference& ref) {
  const std::size_t n = ref.x.size();
  const double tol = 1e-6 * ref.magnitude;
  for (cpu::Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    const std::vector<float> got = dequantized(type, row, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], ref.x[i], tol) << "element " << i;
    std::vector<float> unit(n, 0.0f);
    for (std::size_t i = 0; i < n; i += 7) {
      unit[i] = 1.0f;
      ASSERT_NEAR(cpu::dot_row(type, row.data(), unit.data(), n), ref.x[i], tol) << "dot picking element " << i;
      unit[i] = 0.0f;
    }
  }
}

TEST(BlockDecode, Q8_0) {
  cpu::BlockQ8_0 b;
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<std::int8_t>(8 * j - 128);
  const Reference ref = reference_q8_0(b);
  EXPECT_EQ(ref.x[0], -64.0);
  EXPECT_EQ(ref.x[31], 60.0);
  expect_decodes_to(DType::Q8_0, bytes_of(b), ref);
}

TEST(BlockDecode, Q4_0) {
  cpu::BlockQ4_0 b;
  b.d = 0xB400;  // -0.25
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>(j | (15 - j) << 4);
  const Reference ref = reference_q4_0(b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(ref.x[j], -0.25 * (j - 8));
    EXPECT_EQ(ref.x[j + 16], -0.25 * (7 - j));
  }
  expect_decodes_to(DType::Q4_0, bytes_of(b), ref);
}

TEST(BlockDecode, Q4_K) {
  cpu::BlockQ4_K b;
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  const std::uint8_t scales[12] = {0xC1, 0x42, 0x83, 0x3F, 0x40, 0x87, 0xFF, 0x01, 0x21, 0x43, 0x65, 0x87};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<std::uint8_t>(l * 7 + 3);
  // Sub-block (scale, min), worked out by hand from the bytes above.
  const std::pair<int, int> expected[8] = {{1, 0}, {2, 7}, {3, 63}, {63, 1}, {49, 18}, {19, 36}, {37, 54}, {7, 8}};
  for (int j = 0; j < 8; ++j) EXPECT_EQ(scale_min(j, b.scales), expected[j]) << "sub-block " << j;
  const Reference ref = reference_q4_k(b);
  EXPECT_EQ(ref.x[0], 3.0);      // 1 * 1 * (qs[0] & 15 = 3) - 0.5 * 0
  EXPECT_EQ(ref.x[32], -3.5);    // 1 * 2 * (qs[0] >> 4 = 0) - 0.5 * 7
  EXPECT_EQ(ref.x[133], 285.0);  // 1 * 49 * (qs[69] = 0xE6 & 15 = 6) - 0.5 * 18
  EXPECT_EQ(ref.x[255], 45.0);   // 1 * 7 * (qs[127] = 0x7C >> 4 = 7) - 0.5 * 8
  expect_decodes_to(DType::Q4_K, bytes_of(b), ref);
}

TEST(BlockDecode, Q6_K) {
  cpu::BlockQ6_K b;
  b.d = 0x3800;  // 0.5
  const std::int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 10, -10, 20, -20, 30, -30};
  std::memcpy(b.scales, scales, sizeof scales);
  for (int l = 0; l < 128; ++l) b.ql[l] = static_cast<std::uint8_t>(l * 13 + 5);
  for (int l = 0; l < 64; ++l) b.qh[l] = static_cast<std::uint8_t>(l * 29 + 7);
  const Reference ref = reference_q6_k(b);
  EXPECT_EQ(ref.x[0], 10.5);      // 0.5 * 1 * ((ql[0] = 5) | (qh[0] = 7 & 3) << 4 = 53, - 32)
  EXPECT_EQ(ref.x[47], 12.0);     // 0.5 * 3 * ((ql[47] = 0x68 & 15) | (qh[15] = 0xBA >> 2 & 3) << 4 = 40, - 32)
  EXPECT_EQ(ref.x[200], -220.0);  // 0.5 * 20 * ((ql[72] = 0xAD >> 4) | (qh[40] = 0x8F >> 4 & 3) << 4 = 10, - 32)
  EXPECT_EQ(ref.x[255], 375.0);   // 0.5 * -30 * ((ql[127] = 0x78 >> 4) | (qh[63] = 0x2A >> 6) << 4 = 7, - 32)
  expect_decodes_to(DType::Q6_K, bytes_of(b), ref);
}

// Every bit pattern (random blocks, several per row) decodes as the reference says.
TEST(BlockDecode, RandomBlocksMatchReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (DType type : quantized_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<std::uint8_t> row = random_bits_row(type, 8 * 256, rng);
    expect_decodes_to(type, row, reference(type, row));
  }
}

TEST(BlockDecode, PlainTypes) {
  const std::vector<std::uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x3555, 0x0400, 0xFBFF, 0x3800};
  const std::vector<double> f16_values = {1, -2, 65504, 0x1p-24, -0.0, 0.333251953125, 0x1p-14, -65504, 0.5};
  const std::vector<std::uint16_t> bf16 = {0x3F80, 0x4049, 0xC2F7, 0x0000, 0x7F7F, 0x3EAB, 0xBF00, 0x4780, 0x3C00};
  const std::vector<double> bf16_values = {1, 3.140625, -123.5, 0, 0x1.FEp127, 0.333984375, -0.5, 65536, 0x1p-7};
  for (cpu::Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    std::vector<float> got(f16.size());
    cpu::dequantize_row(DType::F16, f16.data(), got.data(), f16.size());
    for (std::size_t i = 0; i < f16.size(); ++i) EXPECT_EQ(got[i], f16_values[i]) << "f16 " << i;
    cpu::dequantize_row(DType::BF16, bf16.data(), got.data(), bf16.size());
    for (std::size_t i = 0; i < bf16.size(); ++i) EXPECT_EQ(got[i], bf16_values[i]) << "bf16 " << i;
  }
}

}  // namespace
}  // namespace rf::test
