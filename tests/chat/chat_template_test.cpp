// The front end: what render_chat puts in the template's context, as transformers does.
#include <ctime>
#include <thread>

#include "chat_test_support.h"

namespace rf::test {
namespace {

const auto kMessages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");

TEST(ChatTemplate, RenderChatSetsTransformersVariables) {
  const auto probe = ChatTemplate::parse(
      "{{ bos_token is defined }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt "
      "}}|"
      "{{ messages[0].content }}");
  EXPECT_EQ(render_chat(probe, kMessages, true, "", "</s>"), "False|</s>|True|True|True|Hi");
  EXPECT_EQ(render_chat(probe, kMessages, false, "<s>", ""), "True||True|True|False|Hi");
}

TEST(ChatTemplate, ExtraVariablesAddToAndOverrideTheContext) {
  const auto probe = ChatTemplate::parse("{{ tools|length }}|{{ enable_thinking }}|{{ date_string }}|{{ bos_token }}");
  const auto extra = nlohmann::ordered_json::parse(
      R"({"tools": [{"type": "function"}], "enable_thinking": false, "date_string": "02 Jan 2025", "bos_token": "<B>"})");
  EXPECT_EQ(render_chat(probe, kMessages, false, "<s>", "</s>", extra), "1|False|02 Jan 2025|<B>");
}

// transformers prints tool schemas with their keys in the order given; so must tojson.
TEST(ChatTemplate, TojsonKeepsTheKeyOrderOfTheInput) {
  const auto context =
      nlohmann::ordered_json::parse(R"({"tool": {"name": "f", "description": "d", "parameters": {"z": 1, "a": 2}}})");
  EXPECT_EQ(render_template("{{ tool|tojson }}", context),
            R"({"name": "f", "description": "d", "parameters": {"z": 1, "a": 2}})");
}

TEST(ChatTemplate, ContextMustBeAnObject) {
  EXPECT_THROW(ChatTemplate::parse("x").render(nlohmann::ordered_json::array()), Error);
  EXPECT_THROW(render_chat(ChatTemplate::parse("x"), kMessages, false, "", "", nlohmann::ordered_json::array()), Error);
}

TEST(ChatTemplate, StrftimeNowGivesTheLocalDate) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char year[8];
  std::strftime(year, sizeof year, "%Y", &local);
  EXPECT_EQ(render_template("{{ strftime_now('%Y') }}"), year);
  EXPECT_EQ(render_template("{{ strftime_now('%d %b %Y')|length }}"), "11");
}

TEST(ChatTemplate, RendersFromSeveralThreadsAtOnce) {
  const auto chat_template = ChatTemplate::parse(read_repository_file("tests/fixtures/chat/qwen3.jinja"));
  const std::string expected = render_chat(chat_template, kMessages, true, "", "<|im_end|>");
  std::vector<std::string> outputs(4);
  std::vector<std::thread> threads;
  for (std::string& output : outputs) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) output = render_chat(chat_template, kMessages, true, "", "<|im_end|>");
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& output : outputs) EXPECT_EQ(output, expected);
}

}  // namespace
}  // namespace rf::test
