// Tokenizer::token_pieces, what constrained decoding matches against a grammar: the pieces of a
// text's ids add up to the text (transformers.js' reference encodings), but for the one space
// that SentencePiece prepends and decoding drops from a text's start.
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

class TokenPieces : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenPieces, AddUpToTheReferenceTexts) {
  const Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const auto pieces = tokenizer.token_pieces();
  ASSERT_EQ(pieces.size(), tokenizer.vocab_size());
  std::size_t checked = 0, wrong = 0;
  for (const ReferenceLine& line : read_reference(GetParam())) {
    const bool special = std::any_of(line.ids.begin(), line.ids.end(), [&](auto id) { return tokenizer.is_special(id); });
    if (special || line.decoded != line.text) continue;  // special tokens have no piece; see stream_decoder_test
    std::string joined;
    for (auto id : line.ids) joined += pieces[id];
    const bool prepended = GetParam() == "mistral" && !line.text.empty();
    const std::string expected = prepended ? " " + line.text : line.text;
    ++checked;
    if (joined != expected) {
      ++wrong;
      ADD_FAILURE() << "line " << line.line_number << ": '" << joined << "' vs '" << expected << "'";
    }
  }
  std::printf("%s: %zu reference lines, %zu wrong (tolerance 0)\n", GetParam().c_str(), checked, wrong);
  EXPECT_GT(checked, 100u);
  for (auto id : tokenizer.eog_ids()) EXPECT_EQ(pieces[id], "") << id;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenPieces, ::testing::Values("llama3_1", "qwen3", "mistral"));

}  // namespace
}  // namespace rf::test
