// The Hugging Face fixtures end to end on the CPU backend (the checks are in hf_reference.h).
#include "engine/hf_reference.h"

namespace rf::hf_reference {
namespace {

class HfReference : public HfReferenceTest {
 protected:
  void SetUp() override { load("cpu"); }
};

TEST_P(HfReference, TokenizesThePromptsAsTransformers) { expect_tokenizes_as_transformers(); }

// Every stored type is decoded exactly and computed in fp32 (the quantized references use the same
// dequantized weights), so only fp32 rounding separates us from the float64 reference.
TEST_P(HfReference, LogitsMatchAtEveryPromptPosition) { expect_logits_match(1e-4); }

TEST_P(HfReference, GreedyContinuationIsIdentical) { expect_greedy_continuation_identical(); }

TEST_P(HfReference, PerplexityWithinOneThousandth) { expect_perplexity_within(1e-3); }

INSTANTIATE_TEST_SUITE_P(Fixtures, HfReference, all_cases(), case_name);

}  // namespace
}  // namespace rf::hf_reference
