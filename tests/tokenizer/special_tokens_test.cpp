// BOS/EOS from the post-processor and tokenizer_config.json, special tokens written in text,
// skip_special, and the vocabulary lookups.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer_test_support.h"
#include "util/error.h"

namespace rf::test {
namespace {

bool contains(const std::vector<TokenId>& ids, TokenId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

TEST(SpecialTokens, AddSpecialPrependsBosWhereConfigured) {
  const std::string text = "Hello world";
  const auto& llama = fixture_tokenizer("llama3_1");
  auto plain = llama.encode(text, false);
  plain.insert(plain.begin(), 128000);
  EXPECT_EQ(llama.encode(text, true), plain);

  const auto& mistral = fixture_tokenizer("mistral");
  EXPECT_EQ(mistral.encode(text, true), (std::vector<TokenId>{1, 22557, 1526}));

  const auto& qwen = fixture_tokenizer("qwen3");  // Qwen adds nothing
  EXPECT_EQ(qwen.encode(text, true), qwen.encode(text, false));
  EXPECT_EQ(qwen.encode("", true), std::vector<TokenId>{});
  EXPECT_EQ(mistral.encode("", true), std::vector<TokenId>{1});
}

TEST(SpecialTokens, BosEosAndEndOfGeneration) {
  const auto& llama = fixture_tokenizer("llama3_1");
  EXPECT_EQ(llama.bos_id(), 128000);
  EXPECT_EQ(llama.eos_id(), 128009);  // <|eot_id|>, from tokenizer_config.json
  EXPECT_TRUE(contains(llama.eog_ids(), 128009));
  EXPECT_TRUE(contains(llama.eog_ids(), 128001));  // <|end_of_text|>

  const auto& qwen = fixture_tokenizer("qwen3");
  EXPECT_EQ(qwen.bos_id(), std::nullopt);
  EXPECT_EQ(qwen.eos_id(), 151645);
  EXPECT_EQ(qwen.eog_ids(), (std::vector<TokenId>{151643, 151645}));  // <|endoftext|>, <|im_end|>

  const auto& mistral = fixture_tokenizer("mistral");
  EXPECT_EQ(mistral.bos_id(), 1);
  EXPECT_EQ(mistral.eos_id(), 2);
  EXPECT_EQ(mistral.eog_ids(), std::vector<TokenId>{2});
}

TEST(SpecialTokens, SpecialTokenStringsInTextAreRecognised) {
  const auto& llama = fixture_tokenizer("llama3_1");
  const auto ids = llama.encode("<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>", false);
  ASSERT_GE(ids.size(), 5u);
  EXPECT_EQ(ids.front(), 128006);
  EXPECT_EQ(ids[2], 128007);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(ids[1], llama.encode("user", false).at(0));

  const auto& qwen = fixture_tokenizer("qwen3");
  const auto chat = qwen.encode("<|im_start|>user\nHi<|im_end|>\n<tool_call>", false);
  EXPECT_EQ(chat.front(), 151644);
  EXPECT_TRUE(contains(chat, 151645));
  EXPECT_EQ(chat.back(), 151657);  // a non-special added token is matched too
  EXPECT_FALSE(qwen.is_special(151657));
  EXPECT_TRUE(qwen.is_special(151644));

  // Text between special tokens is normalized on its own: Mistral's "▁" prefix starts it again.
  const auto& mistral = fixture_tokenizer("mistral");
  EXPECT_EQ(mistral.encode("Hello</s>Hello", false), (std::vector<TokenId>{22557, 2, 22557}));
}

TEST(SpecialTokens, SkipSpecialDropsOnlySpecialTokens) {
  const auto& llama = fixture_tokenizer("llama3_1");
  const auto ids = llama.encode("<|begin_of_text|>Hello<|eot_id|>", false);
  EXPECT_EQ(llama.decode(ids, false), "<|begin_of_text|>Hello<|eot_id|>");
  EXPECT_EQ(llama.decode(ids, true), "Hello");

  const auto& qwen = fixture_tokenizer("qwen3");
  const auto tool = qwen.encode("<|im_start|><tool_call>x", false);
  EXPECT_EQ(qwen.decode(tool, true), "<tool_call>x");

  const auto& mistral = fixture_tokenizer("mistral");
  EXPECT_EQ(mistral.decode(mistral.encode("Hello world", true), true), "Hello world");
  EXPECT_EQ(mistral.decode(mistral.encode("Hello world", true), false), "<s> Hello world");
}

TEST(SpecialTokens, VocabularyLookups) {
  const auto& llama = fixture_tokenizer("llama3_1");
  EXPECT_EQ(llama.vocab_size(), 128256u);
  EXPECT_EQ(llama.token_to_id("<|eot_id|>"), 128009);
  EXPECT_EQ(llama.token_to_id("Hello"), 9906);
  EXPECT_EQ(llama.id_to_token(9906), "Hello");
  EXPECT_EQ(llama.id_to_token(128000), "<|begin_of_text|>");
  EXPECT_EQ(llama.token_to_id("no such token"), std::nullopt);
  EXPECT_THROW(llama.id_to_token(128256), Error);
  EXPECT_THROW(llama.id_to_token(-1), Error);

  EXPECT_EQ(fixture_tokenizer("qwen3").vocab_size(), 151669u);
  EXPECT_EQ(fixture_tokenizer("mistral").vocab_size(), 32000u);
  EXPECT_EQ(fixture_tokenizer("mistral").id_to_token(13), "<0x0A>");
}

TEST(SpecialTokens, DecodeDropsIdsWithoutToken) {
  const auto& qwen = fixture_tokenizer("qwen3");  // the model's embedding has rows past the vocabulary
  EXPECT_EQ(qwen.decode({9707, 151900}), "Hello");
}

}  // namespace
}  // namespace rf::test
