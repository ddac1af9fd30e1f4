// The CPU's decoders against llama.cpp's: the first rows of one tensor of each llama.cpp-quantized
// fixture (tests/llama_cpp_quants.h), decoded by dequantize_row and multiplied by dot_row under every
// instruction set, against the values llama.cpp's gguf-py decodes from the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "cpu_test_helpers.h"
#include "formats/gguf.h"
#include "llama_cpp_quants.h"

namespace rf::test {
namespace {

// gguf-py computes in fp32 with a rounding after each multiply and add (d * sc, then * q, then - m),
// the kernels with fused multiply-adds: each decoded value may differ by an ulp or two of the terms
// summed to make it, which are at most twice the row's largest value. 1e-6 of the largest value is
// 8 ulps of it.
constexpr double kDecodeTolerance = 1e-6;
// A dot product's fp32 sums against the double one, relative to sum |w x| (as dot_row_test.cpp).
constexpr double kDotTolerance = 1e-5;

class LlamaCppDecode : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppDecode, MatchesGgufPy) {
  const auto ref = llama_cpp_quant_reference(GetParam());
  ASSERT_FALSE(ref.is_null());
  const GgufFile gguf(llama_cpp_quant_path(ref.at("file").get<std::string>()));
  const auto& decoded = ref.at("decoded");
  const auto& tensor = gguf.tensor(decoded.at("tensor").get<std::string>());
  ASSERT_EQ(dtype_name(tensor.dtype), GetParam());
  const auto rows = decoded.at("rows").get<std::size_t>(), cols = decoded.at("cols").get<std::size_t>();
  ASSERT_EQ(tensor.dims.at(0), cols);
  const auto want = decoded.at("values").get<std::vector<double>>();
  ASSERT_EQ(want.size(), rows * cols);
  double largest = 0;
  for (double v : want) largest = std::max(largest, std::fabs(v));
  ASSERT_GT(largest, 0);

  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<float> x = rng.normal(cols);
  for (cpu::Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    double max_error = 0, max_dot_error = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const auto* row = static_cast<const std::uint8_t*>(tensor.data) + r * row_bytes(tensor.dtype, cols);
      std::vector<float> got(cols);
      cpu::dequantize_row(tensor.dtype, row, got.data(), cols);
      double dot = 0, magnitude = 0;
      for (std::size_t i = 0; i < cols; ++i) {
        max_error = std::max(max_error, std::fabs(got[i] - want[r * cols + i]));
        dot += want[r * cols + i] * x[i];
        magnitude += std::fabs(want[r * cols + i] * x[i]);
      }
      max_dot_error = std::max(max_dot_error, std::fabs(cpu::dot_row(tensor.dtype, row, x.data(), cols) - dot) / magnitude);
    }
    fmt::print("{} {} ({} rows of {}): decoded vs gguf-py max error {:.2e} = {:.2e} of the largest |value| {:.3g} "
               "(tolerance {:.0e}); dot_row vs gguf-py's values in double {:.2e} of sum |w x| (tolerance {:.0e})\n",
               GetParam(), isa_name(isa), rows, cols, max_error, max_error / largest, largest, kDecodeTolerance,
               max_dot_error, kDotTolerance);
    EXPECT_LE(max_error, kDecodeTolerance * largest);
    EXPECT_LE(max_dot_error, kDotTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppDecode, testing::ValuesIn(kLlamaCppQuantTypes), type_test_name);

}  // namespace
}  // namespace rf::test
