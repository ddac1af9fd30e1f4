// StreamDecoder: never a broken UTF-8 sequence, pieces that add up to the full decoding, and the
// first token's leading space handled as the full decoding handles it.
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"
#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

struct Streamed {
  std::string text;
  std::vector<std::string> pieces;
};

Streamed stream(const Tokenizer& tokenizer, const std::vector<TokenId>& ids, bool skip_special = true) {
  StreamDecoder decoder(tokenizer, skip_special);
  Streamed result;
  for (const TokenId id : ids) result.pieces.push_back(decoder.push(id));
  result.pieces.push_back(decoder.flush());
  for (const std::string& piece : result.pieces) result.text += piece;
  return result;
}

class StreamDecoding : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamDecoding, EmojiSplitAcrossTokensNeverBreaksUtf8) {
  const Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const std::string text = "emoji 👩‍👩‍👧‍👦 🚀✨ flags 🇳🇱🇯🇵 and 日本語 done";
  const auto ids = tokenizer.encode(text, false);
  const Streamed streamed = stream(tokenizer, ids);
  for (const std::string& piece : streamed.pieces) EXPECT_TRUE(unicode::is_valid_utf8(piece)) << piece;
  EXPECT_EQ(streamed.text, tokenizer.decode(ids));
  EXPECT_EQ(streamed.text, text);
  // Some emoji take several tokens, so some pushes must have held bytes back.
  EXPECT_GT(std::count(streamed.pieces.begin(), streamed.pieces.end(), ""), 0);
}

TEST_P(StreamDecoding, EveryReferenceLineStreamsToItsText) {
  const Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  for (const ReferenceLine& line : read_reference(GetParam())) {
    // Lines that transformers' space cleanup (Llama 3) changes on decoding are not streamed text.
    if (line.decoded != line.text) continue;
    EXPECT_EQ(stream(tokenizer, line.ids, false).text, line.text) << "line " << line.line_number;
  }
}

TEST_P(StreamDecoding, SkippedBosKeepsTheFirstWordsSpaceHandling) {
  const Tokenizer& tokenizer = fixture_tokenizer(GetParam());
  const auto ids = tokenizer.encode("Hello world, again", true);
  const Streamed streamed = stream(tokenizer, ids);
  EXPECT_EQ(streamed.text, "Hello world, again");
  EXPECT_EQ(streamed.text, tokenizer.decode(ids, true));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StreamDecoding, ::testing::Values("llama3_1", "qwen3", "mistral"));

TEST(StreamDecoder, FirstPieceHasNoMetaspaceSpace) {
  const auto& mistral = fixture_tokenizer("mistral");
  StreamDecoder decoder(mistral);
  EXPECT_EQ(decoder.push(22557), "Hello");  // "▁Hello"
  EXPECT_EQ(decoder.push(1526), " world");  // "▁world"
  EXPECT_EQ(decoder.push(2), "");           // </s>, skipped
  EXPECT_EQ(decoder.push(1526), " world");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(StreamDecoder, ShownSpecialTokensStayInTheText) {
  // As a tool call's marker would be (this Llama 3.0 vocabulary has no <|python_tag|>).
  const auto& llama = fixture_tokenizer("llama3_1");
  const auto marker = llama.token_to_id("<|start_header_id|>");
  ASSERT_TRUE(marker && llama.is_special(*marker));
  const auto ids = llama.encode("<|start_header_id|>{\"a\": 1}<|eot_id|> after", false);
  StreamDecoder shown(llama, true, {*marker});
  std::string text;
  for (const TokenId id : ids) text += shown.push(id);
  EXPECT_EQ(text + shown.flush(), "<|start_header_id|>{\"a\": 1} after");  // <|eot_id|> is still dropped
  StreamDecoder plain(llama);
  text.clear();
  for (const TokenId id : ids) text += plain.push(id);
  EXPECT_EQ(text + plain.flush(), "{\"a\": 1} after");
}

TEST(StreamDecoder, IllFormedBytesBecomeReplacementCharacters) {
  const auto& mistral = fixture_tokenizer("mistral");
  const TokenId byte_0xF0 = *mistral.token_to_id("<0xF0>"), byte_0x9F = *mistral.token_to_id("<0x9F>");
  const TokenId byte_0xFF = *mistral.token_to_id("<0xFF>");
  StreamDecoder decoder(mistral);
  EXPECT_EQ(decoder.push(byte_0xFF), "\uFFFD");
  EXPECT_EQ(decoder.push(byte_0xF0), "");
  EXPECT_EQ(decoder.push(byte_0x9F), "");
  EXPECT_EQ(decoder.push(22557), "\uFFFD Hello");  // the cut-off emoji, then the word
  EXPECT_EQ(decoder.push(byte_0xF0), "");
  EXPECT_EQ(decoder.flush(), "\uFFFD");
}

TEST(StreamDecoder, ThousandsOfTokensStreamQuickly) {
  const auto& mistral = fixture_tokenizer("mistral");
  std::string text;
  for (const ReferenceLine& line : read_reference("mistral")) text += line.text;
  const auto ids = mistral.encode(text, true);
  ASSERT_GT(ids.size(), 20000u);
  const double start = cpu_seconds();
  const Streamed streamed = stream(mistral, ids);
  EXPECT_LT(cpu_seconds() - start, 2.0);
  EXPECT_EQ(streamed.text, mistral.decode(ids, true));
}

}  // namespace
}  // namespace rf::test
