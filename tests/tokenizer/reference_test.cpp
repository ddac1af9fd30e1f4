// Every reference text of the three fixture tokenizers encodes to the ids transformers gives and
// decodes back to its decoded text.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

class ReferenceEncodings : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceEncodings, MatchTransformers) {
  const Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const auto lines = read_reference(GetParam());
  ASSERT_EQ(lines.size(), 200u);
  int mismatches = 0;
  for (const ReferenceLine& line : lines) {
    const auto ids = tokenizer.encode(line.text, false);
    if (ids != line.ids) {
      ++mismatches;
      ADD_FAILURE() << fmt::format("line {}: encode({:?})\n  expected {}\n  got      {}", line.line_number, line.text,
                                   line.ids, ids);
    }
    const std::string decoded = tokenizer.decode(line.ids);
    if (decoded != line.decoded) {
      ++mismatches;
      ADD_FAILURE() << fmt::format("line {}: decode({})\n  expected {:?}\n  got      {:?}", line.line_number, line.ids,
                                   line.decoded, decoded);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ReferenceEncodings, ::testing::Values("llama3_1", "qwen3", "mistral"));

}  // namespace
}  // namespace rf::test
