// llama.cpp's quantization formats end to end on the CPU: the logits of each llama.cpp-quantized
// fixture (tests/llama_cpp_quants.h) equal those of its f32 twin, whose weights llama.cpp's gguf-py
// decoded, at the recorded positions of each prompt, under every instruction set. Both run in fp32
// with the same forward pass, so only the order of the dot products' sums separates them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backend/cpu/cpu_test_helpers.h"
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
  for (cpu::Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    IsaScope scope(isa);
    const TwinLogitErrors e = twin_logit_errors(runner, ref);
    fmt::print("{} {}: logits vs the f32 twin's at {} positions: max error {:.2e} = {:.2e} of the largest |logit| "
               "{:.3g} (tolerance {:.0e})\n",
               GetParam(), isa_name(isa), e.positions, e.max_error, e.max_error / e.largest, e.largest, kTolerance);
    EXPECT_LE(e.max_error, kTolerance * e.largest);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppQuantLogits, testing::ValuesIn(kLlamaCppQuantTypes), type_test_name);

}  // namespace
}  // namespace rf::test
