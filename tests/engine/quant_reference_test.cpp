// llama.cpp's quantization formats end to end on the CPU: the logits of each llama.cpp-quantized
// fixture (tests/llama_cpp_quants.h) equal those of its f32 twin, whose weights llama.cpp's gguf-py
// decoded, at the recorded positions of each prompt, under every instruction set. Both run in fp32
// with the same forward pass, so only the order of the dot products' sums separates them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/cpu_test_helpers.h"
#include "engine/model_runner.h"
#include "engine/perplexity.h"
#include "llama_cpp_quants.h"

namespace rf::test {
namespace {

constexpr double kTolerance = 1e-5;  // of the largest |logit| at the compared positions

class LlamaCppQuantLogits : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppQuantLogits, MatchTheTwinsOnTheCpu) {
  const auto ref = llama_cpp_quant_reference(GetParam());
  ASSERT_FALSE(ref.is_null());
  RunnerOptions options;
  options.device = "cpu";
  options.threads = 2;
  options.ctx_size = 128;
  ModelRunner runner(llama_cpp_quant_path(ref.at("file").get<std::string>()), options);
  const std::size_t vocab = runner.config().vocab_size;
  for (cpu::Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    double max_error = 0, largest = 0;
    std::size_t compared = 0;
    for (const auto& prompt : ref.at("prompts")) {
      const auto ids = prompt.at("ids").get<std::vector<std::int32_t>>();
      const auto positions = prompt.at("positions").get<std::vector<std::size_t>>();
      const auto& want = prompt.at("logits");
      ASSERT_EQ(want.size(), positions.size());
      const std::vector<float> logits = prompt_logits(runner, ids);
      for (std::size_t k = 0; k < positions.size(); ++k) {
        ASSERT_LT(positions[k], ids.size());
        ASSERT_EQ(want[k].size(), vocab);
        for (std::size_t i = 0; i < vocab; ++i) {
          const double got = logits[positions[k] * vocab + i], expected = want[k][i].get<double>();
          ASSERT_TRUE(std::isfinite(got));
          max_error = std::max(max_error, std::fabs(got - expected));
          largest = std::max(largest, std::fabs(expected));
        }
        ++compared;
      }
    }
    fmt::print("{} {}: logits vs the f32 twin's at {} positions: max error {:.2e} = {:.2e} of the largest |logit| "
               "{:.3g} (tolerance {:.0e})\n",
               GetParam(), isa_name(isa), compared, max_error, max_error / largest, largest, kTolerance);
    EXPECT_LE(max_error, kTolerance * largest);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppQuantLogits, testing::ValuesIn(kLlamaCppQuantTypes), type_test_name);

}  // namespace
}  // namespace rf::test
