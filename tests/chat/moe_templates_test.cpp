// The chat templates of the mixture-of-experts checkpoints: Mixtral-8x7B-Instruct-v0.1's (Mistral's
// "v1" template with a system prompt) and Qwen3-30B-A3B's (Qwen3's), held to the renderings
// llama.cpp's tests/test-chat-template.cpp expects for its conversation.
#include "chat_test_support.h"

namespace rf::test {
namespace {

const auto kConversation = nlohmann::ordered_json::parse(R"([
  {"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"},
  {"role": "assistant", "content": "Hi there"}, {"role": "user", "content": "Who are you"},
  {"role": "assistant", "content": "   I am an assistant   "}, {"role": "user", "content": "Another question"}])");

TEST(MoeChatTemplates, MixtralRendersAsLlamaCppExpects) {
  const auto chat_template = ChatTemplate::parse(read_repository_file("tests/fixtures/chat/mixtral.jinja"));
  EXPECT_EQ(render_chat(chat_template, kConversation, true, "", "</s>"),
            " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an "
            "assistant   </s> [INST] Another question [/INST]");
  // The fixture carries the same template; roles that do not alternate are refused.
  const auto fixture = nlohmann::json::parse(read_repository_file("tests/fixtures/models/mixtral/tokenizer_config.json"));
  EXPECT_EQ(fixture.at("chat_template").get<std::string>(), read_repository_file("tests/fixtures/chat/mixtral.jinja"));
  const auto twice = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  EXPECT_THROW(render_chat(chat_template, twice, true, "<s>", "</s>"), Error);
}

TEST(MoeChatTemplates, Qwen3MoeRendersAsLlamaCppExpects) {
  const auto fixture = nlohmann::json::parse(read_repository_file("tests/fixtures/models/qwen3_moe/tokenizer_config.json"));
  const std::string text = fixture.at("chat_template").get<std::string>();
  EXPECT_EQ(text, read_repository_file("tests/fixtures/chat/qwen3.jinja"));
  EXPECT_EQ(render_chat(ChatTemplate::parse(text), kConversation, true, "", "<|im_end|>"),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
            "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
            "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace rf::test
