// The Responses API over chat: input items become the chat messages they mean, chat's field names
// in errors become the Responses API's, and a reply of text and calls becomes the same output
// items whole or streamed, its events numbered in order.
#include "server/responses_api.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "test_server.h"

namespace rf::server {
namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

ResponsesRequest convert(const std::string& raw) { return chat_request_of(json::parse(raw), raw); }

TEST(ResponsesApi, InputItemsBecomeChatMessages) {
  const auto request = convert(R"({"instructions": "Be brief.", "max_output_tokens": 9, "temperature": 0.5,
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "Time"}, {"type": "input_text", "text": "?"}]},
              {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}"},
              {"type": "function_call_output", "call_id": "call_1", "output": "noon"}],
    "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "get_time"},
    "text": {"format": {"type": "json_schema", "name": "t", "schema": {"type": "object"}}}})");
  const ordered_json expected = ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Time?"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "get_time", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "noon"}],
    "max_tokens": 9, "temperature": 0.5,
    "tools": [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object"}}}})");
  EXPECT_EQ(request.chat.dump(1), expected.dump(1));
  EXPECT_EQ(request.settings["instructions"], "Be brief.");
}

TEST(ResponsesApi, ChatFieldsAreNamedAsTheResponsesApiNamesThem) {
  EXPECT_EQ(responses_field("messages[2].content"), "input[2].content");
  EXPECT_EQ(responses_field("max_tokens"), "max_output_tokens");
  EXPECT_EQ(responses_field("response_format.json_schema.schema"), "text.format.schema");
  EXPECT_EQ(responses_field("tools[1].function.parameters"), "tools[1].parameters");
  EXPECT_EQ(responses_field("tool_choice.function.name"), "tool_choice.name");
  EXPECT_EQ(responses_field("temperature"), "temperature");
}

TEST(ResponsesApi, UnsupportedRequestsNameTheirField) {
  auto param_of = [](const std::string& raw) {
    try {
      convert(raw);
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("no error");
  };
  EXPECT_EQ(param_of(R"({})"), "input");
  EXPECT_EQ(param_of(R"({"input": 5})"), "input");
  EXPECT_EQ(param_of(R"({"input": [{"type": "item_reference", "id": "x"}]})"), "input[0].type");
  EXPECT_EQ(param_of(R"({"input": [{"role": "wizard", "content": "x"}]})"), "input[0].role");
  EXPECT_EQ(param_of(R"({"input": "x", "previous_response_id": "resp_1"})"), "previous_response_id");
  EXPECT_EQ(param_of(R"({"input": "x", "background": true})"), "background");
  EXPECT_EQ(param_of(R"({"input": "x", "reasoning": {"effort": "high"}})"), "reasoning.effort");
  EXPECT_EQ(param_of(R"({"input": "x", "text": {"format": {"type": "xml"}}})"), "text.format.type");
  EXPECT_EQ(param_of(R"({"input": "x", "frobnicate": 1})"), "frobnicate");
}

TEST(ResponsesApi, StreamedEventsBuildTheWholeResponse) {
  ResponseOptions options;
  const std::string raw = R"({"tools": [{"type": "function", "function": {"name": "f"}}]})";
  options.tools = requested_tools(raw, json::parse(raw), ToolCallFormat::Hermes);
  const std::string reply = "Calling.<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>";
  const auto identity = new_response_identity("m", json{{"instructions", nullptr}});
  Generation generation;
  generation.text = reply;
  generation.finish = FinishReason::Stop;
  const json whole = response_object(identity, generation, options);
  ASSERT_EQ(whole["output"].size(), 2u);
  EXPECT_EQ(whole["output"][0]["content"][0]["text"], "Calling.");
  EXPECT_EQ(whole["output"][1]["arguments"], R"({"x":1})");
  EXPECT_EQ(whole["status"], "completed");

  auto events = response_events(identity, options);
  std::string frames = events->opening();
  StreamEvent text;
  for (std::size_t at = 0; at < reply.size(); at += 5) {
    text.text = reply.substr(at, 5);
    frames += events->event(0, text);
  }
  StreamEvent finished;
  finished.kind = StreamEvent::Kind::Finished;
  finished.finish = FinishReason::Stop;
  frames += events->event(0, finished);
  frames += events->closing();
  std::vector<std::string> types;
  json completed;
  for (const auto& [name, data] : testing::sse_events(frames)) {
    const json event = json::parse(data);
    EXPECT_EQ(event["type"], name);
    EXPECT_EQ(event["sequence_number"], types.size()) << name;
    types.push_back(name);
    if (name == "response.completed") completed = event["response"];
  }
  const std::vector<std::string> expected_order = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done", "response.completed"};
  std::vector<std::string> distinct;  // text deltas may come in several events
  for (const auto& type : types) {
    if (distinct.empty() || distinct.back() != type || type != "response.output_text.delta") distinct.push_back(type);
  }
  EXPECT_EQ(distinct, expected_order);
  ASSERT_EQ(completed["output"].size(), 2u);
  EXPECT_EQ(completed["output"][0]["content"], whole["output"][0]["content"]);
  EXPECT_EQ(completed["output"][1]["arguments"], whole["output"][1]["arguments"]);
}

}  // namespace
}  // namespace rf::server
