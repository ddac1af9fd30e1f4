// dot_row against a double-precision dot of dequantize_row, and the AVX2 kernels against the
// portable ones, on fresh random rows every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_test_helpers.h"

namespace rf::test {
namespace {

// Lengths that end inside and on vector, unroll and block boundaries.
std::vector<std::size_t> row_lengths(DType type) {
  if (!is_quantized(type)) return {1, 7, 8, 37, 4096, 4096 + 13};
  const std::size_t block = dtype_info(type).block_elems;
  return {block, 3 * block, 4096, 4096 + block};
}

// Weight-like rows through the quantizer, and rows of random bits.
std::vector<std::vector<std::uint8_t>> test_rows(DType type, std::size_t n, Rng& rng) {
  return {quantized(type, rng.weights(n)), random_bits_row(type, n, rng)};
}

class DotRow : public ::testing::TestWithParam<std::tuple<DType, cpu::Isa>> {};

// The error is measured against sum |w_i x_i|, the scale of fp32 rounding in a dot product.
TEST_P(DotRow, MatchesDoubleDotOfDequantizedRow) {
  const auto [type, isa] = GetParam();
  IsaScope scope(isa);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::size_t n : row_lengths(type)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    for (const auto& row : test_rows(type, n, rng)) {
      const std::vector<float> w = dequantized(type, row, n), x = rng.normal(n);
      const double expected = dot_double(w.data(), x.data(), n);
      const double got = cpu::dot_row(type, row.data(), x.data(), n);
      EXPECT_LE(std::fabs(got - expected), 1e-5 * abs_dot(w.data(), x.data(), n)) << got << " vs " << expected;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotRow,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::ValuesIn(supported_isas())),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  isa_name(std::get<1>(info.param));
                         });

class Avx2VsScalar : public ::testing::TestWithParam<DType> {};

// The two paths share the decoding templates; they may differ only in rounding (fused or separate
// multiply-add, summation order).
TEST_P(Avx2VsScalar, Agree) {
  if (!cpu::isa_supported(cpu::Isa::Avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  const DType type = GetParam();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (std::size_t n : row_lengths(type)) {
    SCOPED_TRACE("n = " + std::to_string(n));
    for (const auto& row : test_rows(type, n, rng)) {
      const std::vector<float> x = rng.normal(n);
      auto run = [&](cpu::Isa isa) {
        IsaScope scope(isa);
        return std::pair{dequantized(type, row, n), cpu::dot_row(type, row.data(), x.data(), n)};
      };
      const auto [w_avx2, dot_avx2] = run(cpu::Isa::Avx2);
      const auto [w_scalar, dot_scalar] = run(cpu::Isa::Scalar);
      float max_abs = 0;
      for (float v : w_scalar) max_abs = std::max(max_abs, std::fabs(v));
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(w_avx2[i], w_scalar[i], 1e-6 * max_abs) << "element " << i;
      EXPECT_LE(std::fabs(dot_avx2 - dot_scalar), 1e-6 * abs_dot(w_scalar.data(), x.data(), n))
          << dot_avx2 << " vs " << dot_scalar;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Avx2VsScalar, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace rf::test
