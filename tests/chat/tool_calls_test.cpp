// Tool calls in replies: each format's calls found and the text around them kept, the same
// result however the reply is cut into streamed pieces, and anything that is not a well-formed
// call of an offered function left as text.
#include <gtest/gtest.h>

#include <random>

#include "chat/tool_calls.h"
#include "chat_test_support.h"

namespace rf::test {
namespace {

using ordered_json = nlohmann::ordered_json;

const std::vector<std::string> kNames = {"get_weather", "search"};

// The whole reply pushed at once.
ParsedReply parse_whole(ToolCallFormat format, std::string_view reply, bool parallel = true, bool opened = false) {
  ToolCallParser parser(format, kNames, parallel, opened);
  ParsedReply out = parser.push(reply);
  ParsedReply rest = parser.finish();
  out.content += rest.content;
  out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
  return out;
}

// The reply in random pieces (of 0 to 6 bytes), as tokens stream it.
ParsedReply parse_streamed(ToolCallFormat format, std::string_view reply, std::mt19937& random) {
  ToolCallParser parser(format, kNames);
  ParsedReply out;
  auto take = [&](ParsedReply part) {
    out.content += part.content;
    out.calls.insert(out.calls.end(), part.calls.begin(), part.calls.end());
  };
  for (std::size_t at = 0; at < reply.size();) {
    const std::size_t n = std::min<std::size_t>(random() % 7, reply.size() - at);
    take(parser.push(reply.substr(at, n)));
    at += n;
  }
  take(parser.finish());
  return out;
}

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

void expect_reply(const ParsedReply& got, const Expected& expected, const std::string& what) {
  EXPECT_EQ(got.content, expected.content) << what;
  ASSERT_EQ(got.calls.size(), expected.calls.size()) << what;
  for (std::size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, expected.calls[i].first) << what;
    EXPECT_EQ(got.calls[i].arguments, expected.calls[i].second) << what;
  }
}

struct Case {
  ToolCallFormat format;
  std::string reply;
  Expected expected;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // Hermes: blocks among text; space around the blocks goes with them.
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       {"", {{"get_weather", R"({"city":"Paris"})"}}}},
      {ToolCallFormat::Hermes,
       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", \"days\": 2}}\n</tool_call>\n"
       "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a < b </tool\"}}\n</tool_call>\n",
       {"Let me look.", {{"get_weather", R"({"city":"Lyon","days":2})"}, {"search", R"({"query":"a < b </tool"})"}}}},
      {ToolCallFormat::Hermes, "<think>\nhm\n</think>\n\n<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"x\\\"}\"}</tool_call>",
       {"<think>\nhm\n</think>", {{"search", R"({"query":"x"})"}}}},
      {ToolCallFormat::Hermes, "No tools needed: 3 < 4 and <tool is not a tag.\n", {"No tools needed: 3 < 4 and <tool is not a tag.\n", {}}},
      // Not calls: an unknown function, broken JSON, a block never closed that is not JSON.
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>",
       {"<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", {}}},
      {ToolCallFormat::Hermes, "<tool_call>{\"name\": \"search\", \"arguments\": {</tool_call>",
       {"<tool_call>{\"name\": \"search\", \"arguments\": {</tool_call>", {}}},
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"cut off",
       {"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"cut off", {}}},
      // A block whose closing tag never came but whose JSON is whole is still a call.
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n",
       {"", {{"search", R"({"query":"q"})"}}}},
      // Mistral: text, then [TOOL_CALLS] and a list to the end; a model's own id is kept.
      {ToolCallFormat::Mistral,
       "Sure. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Nice\"}, \"id\": \"a1b2c3d4e\"}, "
       "{\"name\": \"search\", \"arguments\": {\"query\": \"[TOOL_CALLS]\"}}]",
       {"Sure.", {{"get_weather", R"({"city":"Nice"})"}, {"search", R"({"query":"[TOOL_CALLS]"})"}}}},
      {ToolCallFormat::Mistral, "[TOOL_CALLS] [not json", {"[TOOL_CALLS] [not json", {}}},
      // Mistral v11: a name and [ARGS] (and the model's [CALL_ID]) for each call.
      {ToolCallFormat::Mistral,
       "On it.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Nice\"}[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{\"query\": \"[ARGS]\"}",
       {"On it.", {{"get_weather", R"({"city":"Nice"})"}, {"search", R"({"query":"[ARGS]"})"}}}},
      {ToolCallFormat::Mistral, "[TOOL_CALLS]rm_rf[ARGS]{}", {"[TOOL_CALLS]rm_rf[ARGS]{}", {}}},
      {ToolCallFormat::Mistral, "[TOOL_CALLS]search[ARGS]{\"query\": ", {"[TOOL_CALLS]search[ARGS]{\"query\": ", {}}},
      {ToolCallFormat::Mistral, "[TOOL is a word, [TOOL_CALL too", {"[TOOL is a word, [TOOL_CALL too", {}}},
      // Llama 3: the whole reply is the call (after <|python_tag|> or not); ';' separates calls.
      {ToolCallFormat::Llama3, "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"unit\": \"celsius\"}}",
       {"", {{"get_weather", R"({"city":"Rome","unit":"celsius"})"}}}},
      {ToolCallFormat::Llama3,
       "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"a;b\"}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       {"", {{"search", R"({"query":"a;b"})"}, {"get_weather", R"({"city":"Oslo"})"}}}},
      {ToolCallFormat::Llama3, "{\"name\": \"Ada\", \"born\": 1815}", {"{\"name\": \"Ada\", \"born\": 1815}", {}}},
      {ToolCallFormat::Llama3, "Plain text {\"name\": \"search\"}", {"Plain text {\"name\": \"search\"}", {}}},
      {ToolCallFormat::Llama3, "<|pyth", {"<|pyth", {}}},
      // Generic: {"tool_calls": [...]} or {"response": ...}.
      {ToolCallFormat::Generic, "{\"tool_calls\": [{\"name\": \"search\", \"arguments\": {\"query\": \"rust\"}}]}",
       {"", {{"search", R"({"query":"rust"})"}}}},
      {ToolCallFormat::Generic, "{\"response\": \"Hello \\\"there\\\"\\n\"}", {"Hello \"there\"\n", {}}},
      {ToolCallFormat::Generic, "{\"response\": 7}", {"{\"response\": 7}", {}}},
      {ToolCallFormat::Generic, "Just text.", {"Just text.", {}}},
  };
  return all;
}

TEST(ToolCallParser, FindsEachFormatsCallsWholeOrStreamed) {
  std::mt19937 random(2026);
  for (const Case& c : cases()) {
    const std::string what = std::string(to_string(c.format)) + ": " + c.reply;
    expect_reply(parse_whole(c.format, c.reply), c.expected, what);
    for (int trial = 0; trial < 20; ++trial) expect_reply(parse_streamed(c.format, c.reply, random), c.expected, what + " (streamed)");
  }
}

TEST(ToolCallParser, TextStreamsBeforeTheCallEnds) {
  ToolCallParser parser(ToolCallFormat::Hermes, kNames);
  EXPECT_EQ(parser.push("Checking the weather").content, "Checking the weather");
  EXPECT_EQ(parser.push(" now <tool").content, " now");  // the space may go with a call
  const ParsedReply opened = parser.push("_call>\n{\"name\": \"search\", ");
  EXPECT_EQ(opened.content, "");
  EXPECT_TRUE(opened.calls.empty());
  const ParsedReply closed = parser.push("\"arguments\": {}}</tool_call>");
  ASSERT_EQ(closed.calls.size(), 1u);
  EXPECT_EQ(closed.calls[0].arguments, "{}");
  EXPECT_TRUE(parser.called());
}

TEST(ToolCallParser, ParallelFalseKeepsTheFirstCall) {
  const std::string reply = "[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"query\": \"1\"}}, "
                            "{\"name\": \"search\", \"arguments\": {\"query\": \"2\"}}]";
  const ParsedReply reply_one = parse_whole(ToolCallFormat::Mistral, reply, false);
  ASSERT_EQ(reply_one.calls.size(), 1u);
  EXPECT_EQ(reply_one.calls[0].arguments, R"({"query":"1"})");
}

TEST(ToolCallParser, AnOpenedReplyStartsInsideTheCall) {
  // The prompt ended with [TOOL_CALLS]: the reply is the list alone.
  const ParsedReply reply = parse_whole(ToolCallFormat::Mistral, "[{\"name\": \"search\", \"arguments\": {}}]", true, true);
  ASSERT_EQ(reply.calls.size(), 1u);
  EXPECT_EQ(reply.content, "");
  EXPECT_EQ(parse_whole(ToolCallFormat::Mistral, "oops", true, true).content, "oops");
}

TEST(ToolCallFormat, ReadFromTheShippedTemplates) {
  const std::pair<const char*, ToolCallFormat> expected[] = {
      {"tests/fixtures/chat/qwen3.jinja", ToolCallFormat::Hermes},
      {"tests/fixtures/chat/mistral_nemo.jinja", ToolCallFormat::Mistral},
      {"tests/fixtures/chat/llama3_1.jinja", ToolCallFormat::Llama3},
      {"tests/fixtures/chat/llama3.jinja", ToolCallFormat::Generic},
      {"tests/fixtures/chat/mixtral.jinja", ToolCallFormat::Generic},
      {"tests/fixtures/chat/google-gemma-3-it.jinja", ToolCallFormat::Generic},
      {"tests/fixtures/chat/microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::Generic},
  };
  for (const auto& [path, format] : expected) {
    EXPECT_EQ(to_string(tool_call_format(read_repository_file(path))), std::string(to_string(format))) << path;
  }
}

TEST(GenericToolMessages, TeachTheFormatAndWriteTheHistoryAsTheModelWould) {
  const auto tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "search", "description": "Search",
      "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}])");
  const auto messages = ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Find two things."},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": {"query": "a"}}},
        {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": {"query": "b"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "A"},
      {"role": "tool", "tool_call_id": "call_2", "content": "B"}])");
  const auto out = generic_tool_messages(messages, tools);
  ASSERT_EQ(out.size(), 4u);
  const std::string system = out[0]["content"];
  EXPECT_TRUE(system.starts_with("Be brief.\n\nYou can call these tools")) << system;
  EXPECT_NE(system.find(R"({"name":"search","description":"Search","parameters":)"), std::string::npos) << system;
  EXPECT_EQ(out[2]["content"], R"({"tool_calls":[{"name":"search","arguments":{"query":"a"}},{"name":"search","arguments":{"query":"b"}}]})");
  EXPECT_FALSE(out[2].contains("tool_calls"));
  EXPECT_EQ(out[3]["role"], "user");  // both results in one turn
  EXPECT_EQ(out[3]["content"], "{\"tool_response\":{\"tool_call_id\":\"call_1\",\"content\":\"A\"}}\n"
                               "{\"tool_response\":{\"tool_call_id\":\"call_2\",\"content\":\"B\"}}");
  // Without tools only the history is rewritten.
  EXPECT_EQ(generic_tool_messages(messages, nullptr).size(), 4u);
  EXPECT_EQ(generic_tool_messages(messages, nullptr)[0]["content"], "Be brief.");
}

}  // namespace
}  // namespace rf::test
