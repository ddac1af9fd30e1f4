// Tool calls end to end, with each format's real template on a model of its family (random
// weights: a required call must be valid whatever the model writes): the calls in OpenAI's
// shape, the same calls streamed, and the calls and their results back into the next turn.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_server.h"

namespace rf::server::testing {
namespace {

namespace fs = std::filesystem;

// A fixture checkpoint with another chat template beside it (chat_template.jinja wins over
// tokenizer_config.json's).
std::string with_template(const std::string& model, const std::string& jinja) {
  const fs::path source = fs::path(ROCMFORGE_FIXTURES) / "models" / model;
  const fs::path folder = fs::path(ROCMFORGE_SCRATCH) / "tool_models" / (model + "-" + fs::path(jinja).stem().string());
  fs::create_directories(folder);
  for (const auto& entry : fs::directory_iterator(source)) {
    if (!entry.is_regular_file() || fs::exists(folder / entry.path().filename())) continue;
    fs::create_symlink(fs::absolute(entry.path()), folder / entry.path().filename());
  }
  fs::copy_file(fs::path(ROCMFORGE_FIXTURES) / "chat" / jinja, folder / "chat_template.jinja", fs::copy_options::overwrite_existing);
  return folder.string();
}

std::unique_ptr<ModelService> service(const std::string& path) {
  auto runner = std::make_unique<ModelRunner>(path, RunnerOptions{.threads = 2, .ctx_size = 2048, .kv_cache_tokens = 8192});
  return std::make_unique<ModelService>(std::move(runner), "tools", SchedulerOptions{});
}

// Enums and bounded integers, so that even random weights finish a call well within max_tokens.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Lyon"]},
     "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time now",
   "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}])");

struct Case {
  const char* name;
  const char* model;     // a fixture checkpoint; null for the demo model
  const char* template_; // the chat template given to it
  std::size_t id_length; // OpenAI's "call_" and 24, or Mistral's 9
};

class ToolCalls : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    server_ = std::make_unique<TestServer>(service(c.model ? with_template(c.model, c.template_) : kDemoModel));
  }

  json chat(json body, int expected_status = 200) {
    body["messages"] = body.value("messages", json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}}));
    body["tools"] = kTools;
    body["seed"] = 7;
    body["max_tokens"] = body.value("max_tokens", 300);
    auto res = server_->client().Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << res->body;
    return body.value("stream", false) ? json(res->body) : json::parse(res->body);
  }

  // The calls a reply makes, each checked against its function's schema.
  void expect_valid_calls(const json& message, std::size_t at_least) {
    ASSERT_TRUE(message.contains("tool_calls")) << message.dump();
    const json& calls = message["tool_calls"];
    EXPECT_GE(calls.size(), at_least) << message.dump();
    for (const auto& call : calls) {
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["id"].get<std::string>().size(), GetParam().id_length) << call.dump();
      const json arguments = json::parse(call["function"]["arguments"].get<std::string>());
      const std::string name = call["function"]["name"];
      if (name == "get_weather") {
        EXPECT_TRUE(arguments["city"] == "Paris" || arguments["city"] == "Lyon") << arguments.dump();
        EXPECT_GE(arguments["days"].get<int>(), 1);
        EXPECT_LE(arguments["days"].get<int>(), 14);
        EXPECT_EQ(arguments.size(), 2u);
      } else {
        EXPECT_EQ(name, "get_time");
        EXPECT_EQ(arguments, json::object());
      }
    }
  }

  std::unique_ptr<TestServer> server_;
};

TEST_P(ToolCalls, ARequiredCallIsValidWhateverTheModel) {
  const json reply = chat({{"tool_choice", "required"}, {"parallel_tool_calls", false}});
  const json& choice = reply["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << reply.dump();
  EXPECT_TRUE(choice["message"]["content"].is_null()) << reply.dump();
  expect_valid_calls(choice["message"], 1);
  EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u);
}

TEST_P(ToolCalls, ANamedFunctionIsCalled) {
  const json reply = chat({{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  expect_valid_calls(reply["choices"][0]["message"], 1);
  EXPECT_EQ(reply["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST_P(ToolCalls, StreamedCallsAreTheCallsOfTheWholeReply) {
  const json body = {{"tool_choice", "required"}, {"parallel_tool_calls", false}};
  const json whole = chat(body)["choices"][0];
  json streamed_body = body;
  streamed_body["stream"] = true;
  const std::string events = chat(streamed_body).get<std::string>();
  json calls = json::array();
  std::string finish;
  for (const std::string& data : sse_data(events)) {
    if (data == "[DONE]") break;
    const json chunk = json::parse(data);
    const json& choice = chunk["choices"][0];
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const auto& part : choice["delta"]["tool_calls"]) {
      const std::size_t index = part["index"];
      if (index == calls.size()) {  // the first chunk of a call: its id, type and name
        ASSERT_TRUE(part.contains("id")) << data;
        calls.push_back({{"id", part["id"]}, {"type", part["type"]}, {"function", {{"name", part["function"]["name"]}, {"arguments", ""}}}});
      }
      ASSERT_LT(index, calls.size()) << data;
      calls[index]["function"]["arguments"] =
          calls[index]["function"]["arguments"].get<std::string>() + part["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), whole["message"]["tool_calls"].size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i]["function"], whole["message"]["tool_calls"][i]["function"]);  // ids are new each time
  }
}

TEST_P(ToolCalls, CallsAndResultsGoBackIntoTheConversation) {
  const json first = chat({{"tool_choice", "required"}, {"parallel_tool_calls", false}})["choices"][0]["message"];
  ASSERT_TRUE(first.contains("tool_calls"));
  json messages = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}, first});
  messages.push_back({{"role", "tool"}, {"tool_call_id", first["tool_calls"][0]["id"]}, {"content", "{\"sky\": \"clear\"}"}});
  const json second = chat({{"messages", messages}, {"tool_choice", "auto"}, {"max_tokens", 20}});
  const json& message = second["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_TRUE(message["content"].is_string() || message.contains("tool_calls")) << second.dump();
  // tool_choice none: plain text, never a call.
  const json none = chat({{"messages", messages}, {"tool_choice", "none"}, {"max_tokens", 20}});
  EXPECT_FALSE(none["choices"][0]["message"].contains("tool_calls"));
  EXPECT_TRUE(none["choices"][0]["message"]["content"].is_string());
}

INSTANTIATE_TEST_SUITE_P(Formats, ToolCalls,
                         ::testing::Values(Case{"generic", nullptr, nullptr, 29},
                                           Case{"hermes", "qwen3", "qwen3.jinja", 29},
                                           Case{"mistral", "mistral", "mistral_nemo.jinja", 9},
                                           Case{"llama3", "llama3", "llama3_1.jinja", 29},
                                           // Generic, on a template that refuses the system role.
                                           Case{"gemma2", "gemma2", "google-gemma-2-2b-it.jinja", 29}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace rf::server::testing
