// matmul against a naive double-precision loop over the dequantized weights, for shapes that are
// multiples of no tile, one and two threads, and both instruction sets. Outputs start as NaN, so
// any that the kernel leaves unwritten fail.
#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_test_helpers.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::test {
namespace {

// Columns: more than one 1024-column pass of the prefill path, and for plain types a count that
// is no multiple of the vector width either.
std::size_t test_cols(DType type) { return is_quantized(type) ? 1024 + 256 : 1024 + 13; }

class Matmul : public ::testing::TestWithParam<std::tuple<DType, cpu::Isa, int>> {};

TEST_P(Matmul, MatchesNaiveLoop) {
  const auto [type, isa, threads] = GetParam();
  IsaScope scope(isa);
  ThreadPool pool(threads);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::size_t cols = test_cols(type);
  for (std::size_t rows : {1, 7, 33, 257}) {
    const std::vector<std::uint8_t> data = quantized(type, rng.weights(rows * cols));
    const std::vector<float> w = dequantized(type, data, rows * cols);
    for (std::size_t tokens : {1, 3, 17}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", tokens " + std::to_string(tokens));
      const std::vector<float> x = rng.normal(tokens * cols);
      std::vector<float> out(tokens * rows, std::numeric_limits<float>::quiet_NaN());
      cpu::matmul({type, rows, cols, data.data()}, x.data(), tokens, out.data(), pool);
      for (std::size_t t = 0; t < tokens; ++t) {
        for (std::size_t r = 0; r < rows; ++r) {
          const float* wr = &w[r * cols];
          const float* xt = &x[t * cols];
          const double expected = dot_double(wr, xt, cols);
          ASSERT_LE(std::fabs(out[t * rows + r] - expected), 1e-5 * abs_dot(wr, xt, cols))
              << "token " << t << ", row " << r << ": " << out[t * rows + r] << " vs " << expected;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmul,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::ValuesIn(supported_isas()),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  isa_name(std::get<1>(info.param)) + "_" + std::to_string(std::get<2>(info.param)) +
                                  "threads";
                         });

TEST(MatmulShapes, RejectsPartialBlocks) {
  ThreadPool pool(1);
  std::vector<std::uint8_t> data(dtype_info(DType::Q4_K).block_bytes);
  std::vector<float> x(300), out(1);
  EXPECT_THROW(cpu::matmul({DType::Q4_K, 1, 300, data.data()}, x.data(), 1, out.data(), pool), Error);
}

TEST(MatmulShapes, ZeroColumnsGiveZeros) {
  ThreadPool pool(1);
  std::vector<float> out(6, std::numeric_limits<float>::quiet_NaN());
  cpu::matmul({DType::F32, 2, 0, nullptr}, nullptr, 3, out.data(), pool);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace rf::test
