// quantize_row then dequantize_row: errors within each format's bound, GGML's reference encoding
// for Q8_0 and Q4_0, and degenerate rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cpu_test_helpers.h"
#include "util/error.h"

namespace rf::test {
namespace {

constexpr std::size_t kRow = 64 * 256;

struct ErrorStats {
  double max_abs = 0;    // max |x - decoded|
  double max_ratio = 0;  // max |x - decoded| / bound(x's block)
  double rel_rms = 0;    // sqrt(sum (x - decoded)^2 / sum x^2)
};

// Largest error the format may make on an element of a block whose largest magnitude is amax.
// Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 and IQ4_NL follow from the encoding (plus the f16 rounding of d and m).
// The K-quants fit scales by least squares, which may clip an outlier by a step or so; theirs, and
// IQ4_XS's (6-bit sub-block scales), are the worst seen over 40 runs (q4_k 0.124, q6_k 0.024) or 20
// (q2_k 0.45, q3_k 0.24, q5_k 0.061, iq4_xs 0.122) with margin. These encoders are the project's own
// simple ones (backend/cpu/encode.cpp), for synthetic weights and tests, not llama.cpp's.
double error_bound(DType type, double x, double amax) {
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return std::fabs(x) * 0x1p-11 + 0x1p-25;
    case DType::BF16: return std::fabs(x) * 0x1p-8;
    case DType::Q8_0: return amax * (0.5 / 127 + 0x1p-11) * (1 + 1e-6);  // half a step
    case DType::Q4_0: return amax / 8 * (1 + 0x1p-8);                    // a whole step where +8 clips to 7
    case DType::Q4_K: return amax * 0.15;
    case DType::Q6_K: return amax * 0.035;
    case DType::Q4_1: return amax * (1.0 / 15 + 0x1p-8);  // half a step of at most 2 amax / 15
    case DType::Q5_0: return amax / 16 * (1 + 0x1p-8);    // as Q4_0: where +16 clips to 15
    case DType::Q5_1: return amax * (1.0 / 31 + 0x1p-8);  // as Q4_1
    case DType::Q2_K: return amax * 0.6;
    case DType::Q3_K: return amax * 0.32;
    case DType::Q5_K: return amax * 0.08;
    case DType::IQ4_NL: return amax * (14.0 / 127 + 0x1p-10);  // +amax where -amax is -127: nearest 113
    case DType::IQ4_XS: return amax * 0.16;
    case DType::F64:
    case DType::I32:
    case DType::I64: break;
  }
  return 0;
}

// The bound uses the largest magnitude of the block the element falls in (the whole 256-element
// block for the K-quants: their sub-block scales are 6-bit multiples of the block's scale, so a
// quiet sub-block next to a loud one gets a coarse grid).
ErrorStats measure(DType type, const std::vector<float>& x, const std::vector<float>& y) {
  const std::size_t group = is_quantized(type) ? dtype_info(type).block_elems : 1;
  ErrorStats s;
  double err2 = 0, x2 = 0;
  for (std::size_t g = 0; g < x.size(); g += group) {
    double amax = 0;
    for (std::size_t i = g; i < g + group; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    for (std::size_t i = g; i < g + group; ++i) {
      const double e = std::fabs(static_cast<double>(x[i]) - y[i]);
      s.max_abs = std::max(s.max_abs, e);
      const double bound = error_bound(type, x[i], amax);
      s.max_ratio = std::max(s.max_ratio, bound > 0 ? e / bound : (e > 0 ? INFINITY : 0));
      err2 += e * e;
      x2 += static_cast<double>(x[i]) * x[i];
    }
  }
  s.rel_rms = std::sqrt(err2 / x2);
  return s;
}

// Relative RMS error on gaussian data: the worst measured over 40 runs (f16 2.1e-4, bf16 1.7e-3,
// q8_0 5.4e-3, q4_0 0.086, q4_k 0.072, q6_k 0.018) or 20 (q4_1 0.079, q5_0 0.043, q5_1 0.038, q2_k
// 0.272, q3_k 0.145, q5_k 0.036, iq4_nl 0.081, iq4_xs 0.081) with margin.
double rms_bound(DType type) {
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return 3e-4;
    case DType::BF16: return 3e-3;
    case DType::Q8_0: return 0.01;
    case DType::Q4_0: return 0.12;
    case DType::Q4_K: return 0.10;
    case DType::Q6_K: return 0.025;
    case DType::Q4_1: return 0.10;
    case DType::Q5_0: return 0.06;
    case DType::Q5_1: return 0.05;
    case DType::Q2_K: return 0.33;
    case DType::Q3_K: return 0.18;
    case DType::Q5_K: return 0.05;
    case DType::IQ4_NL: return 0.10;
    case DType::IQ4_XS: return 0.10;
    case DType::F64:
    case DType::I32:
    case DType::I64: break;
  }
  return 0;
}

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, ErrorWithinFormatBound) {
  const DType type = GetParam();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const bool gaussian : {true, false}) {
    const std::vector<float> x = gaussian ? rng.normal(kRow) : rng.weights(kRow);
    const ErrorStats s = measure(type, x, dequantized(type, quantized(type, x), kRow));
    std::printf("  %-5s %-8s max abs error %.3g (%.2f of bound), relative rms error %.4g\n",
                std::string(dtype_name(type)).c_str(), gaussian ? "gaussian" : "weights", s.max_abs, s.max_ratio,
                s.rel_rms);
    EXPECT_LE(s.max_ratio, 1.0) << (gaussian ? "gaussian" : "weights");
    if (gaussian) {
      EXPECT_LE(s.rel_rms, rms_bound(type));
    }
  }
}

TEST_P(RoundTrip, ZeroRowDecodesToZero) {
  const DType type = GetParam();
  const std::vector<float> x(kRow, 0.0f);
  for (float v : dequantized(type, quantized(type, x), kRow)) ASSERT_EQ(v, 0.0f);
}

TEST_P(RoundTrip, ConstantRowIsNearlyExact) {
  const DType type = GetParam();
  for (const float c : {0.75f, -3.5f}) {
    const std::vector<float> x(kRow, c);
    for (float v : dequantized(type, quantized(type, x), kRow)) ASSERT_NEAR(v, c, std::fabs(c) * 2e-3) << c;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class PartialBlocks : public ::testing::TestWithParam<DType> {};

TEST_P(PartialBlocks, AreRejected) {
  const DType type = GetParam();
  std::vector<float> x(dtype_info(type).block_elems + 1);
  std::vector<std::uint8_t> row(2 * dtype_info(type).block_bytes);
  EXPECT_THROW(cpu::quantize_row(type, x.data(), row.data(), x.size()), Error);
  EXPECT_THROW(cpu::dequantize_row(type, row.data(), x.data(), x.size()), Error);
  EXPECT_THROW(cpu::dot_row(type, row.data(), x.data(), x.size()), Error);
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, PartialBlocks,
                         ::testing::ValuesIn(quantized_dtypes()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// GGML's quantize_row_q8_0_ref on x_j = j - 12.25: d = max abs / 127 = 18.75 / 127, q = round(x / d).
TEST(ReferenceEncoding, Q8_0) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 12.25f;
  cpu::BlockQ8_0 b;
  cpu::quantize_row(DType::Q8_0, x.data(), &b, 32);
  const float d = 18.75f / 127.0f;
  EXPECT_EQ(b.d, f32_to_f16(d));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], static_cast<int>(std::round(x[j] * (1.0f / d)))) << j;
}

// GGML's quantize_row_q4_0_ref on x_j = j - 16: the largest magnitude is x_0 = -16, so d = 2 and
// q_j = min(15, floor(x_j / 2 + 8.5)) = min(15, floor((j + 1) / 2)); x_31 = 15 clips to q = 15.
TEST(ReferenceEncoding, Q4_0) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  cpu::BlockQ4_0 b;
  cpu::quantize_row(DType::Q4_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, f32_to_f16(2.0f));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(b.qs[j] & 15, (j + 1) / 2) << j;
    EXPECT_EQ(b.qs[j] >> 4, std::min(15, (j + 17) / 2)) << j;
  }
}

}  // namespace
}  // namespace rf::test
