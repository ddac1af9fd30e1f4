// Load and encode speed on the real vocabularies, in processor time. The bounds are loose (the
// test machines are shared); the measured numbers are printed for the record.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

class TokenizerPerformance : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerPerformance, LoadsQuicklyAndEncodesFast) {
  const double load_start = cpu_seconds();
  const Tokenizer tokenizer = Tokenizer::from_json_file(tokenizer_fixture(GetParam(), "tokenizer.json"));
  const double load_seconds = cpu_seconds() - load_start;

  std::string text;  // all reference texts, about 78 KB
  for (const ReferenceLine& line : read_reference(GetParam())) text += line.text + "\n";
  constexpr int kRounds = 5;
  std::size_t token_count = 0;
  const double encode_start = cpu_seconds();
  for (int round = 0; round < kRounds; ++round) token_count += tokenizer.encode(text, false).size();
  const double encode_seconds = cpu_seconds() - encode_start;

  const std::string message = fmt::format("{}: load {:.0f} ms; encode {} bytes x{}: {:.0f} tokens/s, {:.1f} MB/s", GetParam(),
                                          load_seconds * 1e3, text.size(), kRounds, token_count / encode_seconds,
                                          kRounds * text.size() / encode_seconds / 1e6);
  std::cout << message << "\n";
  RecordProperty("performance", message);
  EXPECT_LT(load_seconds, 2.0);
  EXPECT_GT(token_count / encode_seconds, 100e3);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerPerformance, ::testing::Values("llama3_1", "qwen3", "mistral"));

// A long word without spaces must not make BPE quadratic.
TEST(TokenizerPerformanceLimits, LongWordEncodesInLinearishTime) {
  const Tokenizer& tokenizer = fixture_tokenizer("qwen3");
  std::string word;
  for (int i = 0; i < 20000; ++i) word += "abcdefghij"[i * 7 % 10];
  const double start = cpu_seconds();
  const auto ids = tokenizer.encode(word, false);
  EXPECT_LT(cpu_seconds() - start, 1.0);
  EXPECT_EQ(tokenizer.decode(ids), word);
}

}  // namespace
}  // namespace rf::test
