// Fill-in-the-middle prompts: the family's tokens found by name, and the prompt in
// prefix-suffix-middle order with each part tokenized as plain text.
#include "tokenizer/fill_in_middle.h"

#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace rf::test {
namespace {

TEST(FillInTheMiddle, QwensTokensMakeAPrefixSuffixMiddlePrompt) {
  const Tokenizer& qwen = fixture_tokenizer("qwen3");
  const auto fim = fim_tokens(qwen);
  ASSERT_TRUE(fim);
  EXPECT_EQ(fim->prefix, 151659);
  EXPECT_EQ(fim->middle, 151660);
  EXPECT_EQ(fim->suffix, 151661);
  const auto prefix = qwen.encode("def add(a, b):\n    return ", false), suffix = qwen.encode("\n\nprint(add(1, 2))\n", false);
  std::vector<TokenId> expected = {151659};  // Qwen adds no BOS
  expected.insert(expected.end(), prefix.begin(), prefix.end());
  expected.push_back(151661);
  expected.insert(expected.end(), suffix.begin(), suffix.end());
  expected.push_back(151660);
  EXPECT_EQ(fim_prompt(qwen, *fim, "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"), expected);
  EXPECT_EQ(qwen.decode(fim_prompt(qwen, *fim, "x = ", "\n")), "<|fim_prefix|>x = <|fim_suffix|>\n<|fim_middle|>");
}

TEST(FillInTheMiddle, VocabulariesWithoutTheTokensHaveNone) {
  EXPECT_FALSE(fim_tokens(fixture_tokenizer("llama3_1")));
  EXPECT_FALSE(fim_tokens(fixture_tokenizer("mistral")));
}

}  // namespace
}  // namespace rf::test
