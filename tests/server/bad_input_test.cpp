// Malformed and hostile requests get an OpenAI-shaped error with the right status, never a
// crash, and the server goes on answering.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer(demo_service(), ServerOptions{.max_body_bytes = 64 << 10});
  }
  static void TearDownTestSuite() { delete server_; }

  // Posts `body` and checks the status and the error's shape; returns the error object.
  static json expect_error(const std::string& path, const std::string& body, int status) {
    auto res = server_->client().Post(path, body, "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, status) << body.substr(0, 200) << "\n" << res->body;
    const json parsed = json::parse(res->body, nullptr, false);
    EXPECT_TRUE(parsed.is_object() && parsed.contains("error")) << res->body;
    if (!parsed.is_object() || !parsed.contains("error")) return {};
    const json& error = parsed["error"];
    EXPECT_TRUE(error["message"].is_string());
    EXPECT_TRUE(error["type"].is_string());
    EXPECT_TRUE(error.contains("param") && error.contains("code"));
    return error;
  }
  static TestServer* server_;
};
TestServer* BadInput::server_ = nullptr;

TEST_F(BadInput, InvalidJsonAndWrongTypes) {
  expect_error("/v1/completions", "{\"prompt\": \"hi\",", 400);
  expect_error("/v1/completions", "[1, 2, 3]", 400);
  expect_error("/v1/completions", "", 400);
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "temperature": "hot"})", 400)["param"], "temperature");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "max_tokens": 2.5})", 400)["param"], "max_tokens");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "max_tokens": 0})", 400)["param"], "max_tokens");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "top_p": 7})", 400)["param"], "top_p");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "stream": "yes"})", 400)["param"], "stream");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "stop": [1, 2]})", 400)["param"], "stop");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "seed": 18446744073709551615})", 400)["param"], "seed");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": {"text": "hi"}})", 400)["param"], "prompt");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": [1, 99999999]})", 400)["type"], "invalid_request_error");
  EXPECT_EQ(expect_error("/v1/completions", R"({"max_tokens": 3})", 400)["param"], "prompt");
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"messages": "hello"})", 400)["param"], "messages");
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400)["param"], "messages[0].role");
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 7}]})", 400)["param"], "messages[0].content");
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3})", 400)["param"], "top_logprobs");
}

// What would change the answer and is not implemented yet is refused, naming the field; its neutral
// values are taken.
TEST_F(BadInput, UnimplementedFieldsAreRefusedNotIgnored) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const std::pair<const char*, json> refused[] = {
      {"tool_choice", "required"},  // with no tools to call
      {"functions", {{{"name", "f"}}}},
      {"function_call", {{"name", "f"}}},
      {"modalities", {"text", "audio"}},
      {"audio", {{"voice", "alloy"}, {"format", "wav"}}},
  };
  for (const auto& [field, value] : refused) {
    json body = chat;
    body[field] = value;
    EXPECT_EQ(expect_error("/v1/chat/completions", body.dump(), 400)["param"], field) << body.dump();
  }
  // The demo model has no fill-in-the-middle tokens; chat takes no suffix at all.
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "suffix": " end"})", 400)["param"], "suffix");
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "suffix": "x"})", 400)["param"],
            "suffix");
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "tools": [{"type": "function", "function": {"name": "f"}}]})", 400)["param"],
            "tools");
  for (const char* bias : {R"([1, 2])", R"({"x": 1})", R"({"5": 101})", R"({"5": "up"})", R"({"-3": 1})"}) {
    const std::string body = std::string(R"({"prompt": "hi", "logit_bias": )") + bias + "}";
    EXPECT_EQ(expect_error("/v1/completions", body, 400)["param"], "logit_bias") << body;
  }
  // Ids past the vocabulary: the scheduler's check, a 400 all the same.
  expect_error("/v1/completions", R"({"prompt": "hi", "logit_bias": {"99999999": 1}})", 400);
  EXPECT_EQ(expect_error("/v1/completions", R"({"prompt": "hi", "best_of": 3})", 400)["param"], "best_of");
  json neutral = chat;
  neutral.update({{"response_format", {{"type", "text"}}}, {"tools", json::array()}, {"tool_choice", "none"},
                  {"logit_bias", json::object()}, {"modalities", {"text"}}, {"best_of", 1}});
  const auto res = server_->client().Post("/v1/chat/completions", neutral.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

// Structured output that is malformed, cannot be enforced or asks twice: a 400 naming the field.
TEST_F(BadInput, StructuredOutputMistakesNameTheirField) {
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  const json schema_format = {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}};
  const std::pair<json, const char*> cases[] = {
      {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
      {{{"response_format", "json"}}, "response_format"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", 5}}}}}}, "response_format.json_schema.name"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "number"}, {"multipleOf", 2.5}}}}}}}},
       "response_format.json_schema.schema"},
      {{{"grammar", "root ::= missing"}}, "grammar"},
      {{{"grammar", 5}}, "grammar"},
      {{{"json_schema", {{"type", "array"}, {"uniqueItems", true}}}}, "json_schema"},
      {{{"json_schema", "object"}}, "json_schema"},
      {{{"response_format", schema_format}, {"grammar", "root ::= \"a\""}}, "response_format"},
  };
  for (const auto& [fields, param] : cases) {
    json body = chat;
    body.update(fields);
    const json error = expect_error("/v1/chat/completions", body.dump(), 400);
    EXPECT_EQ(error["param"], param) << body.dump() << " -> " << error.dump();
  }
}

TEST_F(BadInput, EmptyMessagesAndUnknownModels) {
  EXPECT_EQ(expect_error("/v1/chat/completions", R"({"model": "kjv-llama", "messages": []})", 400)["param"], "messages");
  const json unknown = expect_error("/v1/chat/completions", R"({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})", 404);
  EXPECT_EQ(unknown["code"], "model_not_found");
  EXPECT_EQ(expect_error("/v1/completions", R"({"model": "gpt-4o", "prompt": "hi"})", 404)["param"], "model");
}

TEST_F(BadInput, InvalidUtf8) {
  expect_error("/v1/completions", "{\"prompt\": \"caf\xc3\x28 \xff\xfe\"}", 400);
  expect_error("/v1/completions", R"({"prompt": "lone surrogate \udc00"})", 400);
}

TEST_F(BadInput, PromptsLongerThanTheContext) {
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "and the LORD said ";
  const json error = expect_error("/v1/completions", json{{"prompt", long_prompt}}.dump(), 400);
  EXPECT_EQ(error["code"], "context_length_exceeded");
  expect_error("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", long_prompt}}}}}.dump(), 400);
}

TEST_F(BadInput, HugeBodiesAreRefused) {
  const std::string huge = json{{"prompt", std::string(200 << 10, 'a')}}.dump();
  expect_error("/v1/completions", huge, 413);
}

TEST_F(BadInput, UnknownRoutesAndJobs) {
  auto res = server_->client().Get("/v1/nothing-here");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body).contains("error"));
  EXPECT_EQ(server_->client().Get("/v1/jobs/job-nope/stream")->status, 404);
  EXPECT_EQ(server_->client().Delete("/v1/jobs/job-nope")->status, 404);
  EXPECT_EQ(expect_error("/v1/jobs", R"({"operation": "download", "prompt": "hi"})", 400)["param"], "operation");
  EXPECT_EQ(expect_error("/v1/jobs", R"({"operation": "infer"})", 400)["param"], "prompt");
  EXPECT_EQ(expect_error("/v1/jobs", R"({"operation": "infer", "prompt": "hi", "top_k": "many"})", 400)["param"], "top_k");
}

TEST_F(BadInput, TheServerStillAnswersAfterAll) {
  auto res = server_->client().Post("/v1/completions", R"({"prompt": "In the beginning", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(ServerLifecycle, HealthIsUnavailableUntilTheModelLoads) {
  TestServer server(std::unique_ptr<ModelService>{});
  auto health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_TRUE(health->has_header("Retry-After"));
  auto completion = server.client().Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
  EXPECT_EQ(completion->status, 503);
  EXPECT_EQ(json::parse(completion->body)["error"]["code"], "model_loading");
  EXPECT_EQ(server.client().Get("/ready")->status, 503);
  server.server().set_model(demo_service());
  EXPECT_EQ(server.client().Get("/health")->status, 200);
  EXPECT_EQ(server.client().Get("/ready")->status, 200);
}

// --max-queue 0 leaves no waiting room, but the running slots still take requests.
TEST(ServerLifecycle, AFullQueueAnswers429WithRetryAfter) {
  TestServer server(demo_service({.max_running = 1, .max_queued = 0}));
  auto busy = server.client();
  std::thread holder([&] {  // holds the one slot until its 400 tokens are done
    busy.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 400, "ignore_eos": true})", "application/json");
  });
  const auto& metrics = server.model().scheduler().metrics();
  while (metrics.running + metrics.waiting == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto res = server.client().Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429) << res->body;
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(res->body)["error"]["type"], "rate_limit_error");
  holder.join();
  res = server.client().Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
}

// A call asking for more sequences than the server holds (prompts times n) could never run: a 400
// naming n before any is queued (issue #29: 64 prompts with n 16 used to queue 256 of them, then
// answer 429, and every other client got 429 until the engine had dropped them).
TEST(ServerLifecycle, ACallLargerThanTheServerIsRefusedWithoutQueueingAny) {
  TestServer server(demo_service({.max_running = 2, .max_queued = 2}));
  auto res = server.client().Post("/v1/completions", R"({"prompt": ["a", "b", "c"], "n": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  const auto error = json::parse(res->body)["error"];
  EXPECT_EQ(error["param"], "n");
  EXPECT_NE(error["message"].get<std::string>().find("asks for 6 sequences (3 prompts, n = 2), more than the server "
                                                     "holds at once (4"),
            std::string::npos)
      << res->body;
  EXPECT_EQ(server.model().scheduler().metrics().waiting, 0);
  // Nothing was queued: a call of all four places runs at once.
  res = server.client().Post("/v1/completions", R"({"prompt": ["a", "b"], "n": 2, "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["choices"].size(), 4u);
}

// A call that fits the server but not the places free now is a 429 that queues none of it, so the
// places it would have held stay free for the next client.
TEST(ServerLifecycle, ACallLargerThanTheFreePlacesLeavesThemFree) {
  TestServer server(demo_service({.max_running = 1, .max_queued = 3}));
  auto busy = server.client();
  std::thread holder([&] {
    busy.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 400, "ignore_eos": true})", "application/json");
  });
  const auto& metrics = server.model().scheduler().metrics();
  while (metrics.running + metrics.waiting == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto res = server.client().Post("/v1/completions", R"({"prompt": "hi", "n": 4, "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429) << res->body;
  res = server.client().Post("/v1/completions", R"({"prompt": "hi", "n": 3, "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  holder.join();
}

// --cors-origin: an allowed origin's requests carry Access-Control-Allow-Origin and its preflights are
// answered (before the API key, which a preflight never carries); other origins get neither.
TEST(ServerLifecycle, AllowedOriginsGetCorsHeadersAndPreflights) {
  TestServer server(demo_service(), ServerOptions{.api_key = "sesame", .cors_origins = {"http://app.example"}});
  httplib::Headers preflight = {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto res = server.client().Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(res->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  res = server.client("sesame").Get("/v1/models", {{"Origin", "http://app.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  preflight.erase("Origin");
  preflight.emplace("Origin", "http://elsewhere.example");
  res = server.client().Options("/v1/chat/completions", preflight);
  ASSERT_TRUE(res);
  EXPECT_NE(res->status, 204);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  TestServer any(demo_service(), ServerOptions{.cors_origins = {"*"}});
  res = any.client().Get("/v1/models", {{"Origin", "http://elsewhere.example"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "*");
}

TEST(ServerLifecycle, TheApiKeyGuardsEverythingButHealth) {
  TestServer server(demo_service(), ServerOptions{.api_key = "sesame"});
  EXPECT_EQ(server.client().Get("/health")->status, 200);
  for (const char* path : {"/v1/models", "/metrics", "/ready"}) {
    auto res = server.client().Get(path);
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_EQ(json::parse(res->body)["error"]["code"], "invalid_api_key");
    EXPECT_EQ(server.client("wrong").Get(path)->status, 401) << path;
    EXPECT_EQ(server.client("sesame").Get(path)->status, 200) << path;
  }
  EXPECT_EQ(server.client().Post("/v1/completions", R"({"prompt": "hi"})", "application/json")->status, 401);
}

}  // namespace
}  // namespace rf::server::testing
