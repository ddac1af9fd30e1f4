// OpenAI's routes over real HTTP: response shapes, streaming that adds up to the whole answer,
// usage and finish reasons, and the model list.
#include <gtest/gtest.h>

#include "test_server.h"

namespace rf::server::testing {
namespace {

class OpenAiApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(demo_service()); }
  static void TearDownTestSuite() { delete server_; }
  static json post(const std::string& path, const json& body, int expected_status = 200) {
    auto res = server_->client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, expected_status) << res->body;
    return json::parse(res->body);
  }
  static std::string stream(const std::string& path, const json& body) {
    auto res = server_->client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200);
    if (!res) return {};
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    return res->body;
  }
  static TestServer* server_;
};
TestServer* OpenAiApi::server_ = nullptr;

TEST_F(OpenAiApi, ListsTheModel) {
  auto res = server_->client().Get("/v1/models");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  const json body = json::parse(res->body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "kjv-llama");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(server_->client().Get("/v1/models/kjv-llama")->status, 200);
  EXPECT_EQ(server_->client().Get("/v1/models/gpt-4")->status, 404);
}

TEST_F(OpenAiApi, CompletionHasOpenAisShape) {
  const json r = post("/v1/completions", {{"model", "kjv-llama"}, {"prompt", "In the beginning"}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_TRUE(r["id"].get<std::string>().starts_with("cmpl-"));
  EXPECT_EQ(r["model"], "kjv-llama");
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_FALSE(r["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 4);  // BOS + 3
  EXPECT_EQ(r["usage"]["total_tokens"], 12);
}

TEST_F(OpenAiApi, StreamedCompletionAddsUpToTheWholeOne) {
  const json request = {{"prompt", "And the LORD said unto Moses,"}, {"max_tokens", 24}, {"temperature", 0}};
  const json whole = post("/v1/completions", request);
  json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  const auto frames = sse_data(stream("/v1/completions", streamed_request));
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.back(), "[DONE]");
  std::string text;
  std::string finish;
  json usage;
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
    const json chunk = json::parse(frames[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    if (!chunk["usage"].is_null()) usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(finish, whole["choices"][0]["finish_reason"].get<std::string>());
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);
}

TEST_F(OpenAiApi, ChatCompletionUsesTheChatTemplate) {
  const json messages = json::array({{{"role", "system"}, {"content", "Speak as the King James Bible."}},
                                     {{"role", "user"}, {"content", "Who made the heaven and the earth?"}}});
  const json r = post("/v1/chat/completions", {{"messages", messages}, {"max_completion_tokens", 12}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_TRUE(r["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string());
  // The rendered template: BOS, two headers with their turns, the assistant's header.
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 20);

  const auto frames = sse_data(stream("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}}));
  ASSERT_EQ(frames.back(), "[DONE]");
  const json first = json::parse(frames[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
    const json delta = json::parse(frames[i])["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(content, r["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(json::parse(frames[frames.size() - 2])["choices"][0]["finish_reason"], r["choices"][0]["finish_reason"]);
}

TEST_F(OpenAiApi, StopStringsEndTheTextBeforeThem) {
  const json whole = post("/v1/completions", {{"prompt", "In the beginning"}, {"max_tokens", 20}, {"temperature", 0}});
  const std::string text = whole["choices"][0]["text"];
  const std::string stop = text.substr(text.size() / 2, 3);
  const json stopped = post("/v1/completions", {{"prompt", "In the beginning"}, {"max_tokens", 20}, {"temperature", 0}, {"stop", stop}});
  EXPECT_EQ(stopped["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
}

// A bias of 100 on one token makes greedy decoding repeat it, whatever the model prefers.
TEST_F(OpenAiApi, LogitBiasSteersTheTokens) {
  constexpr std::int32_t kToken = 100;
  const json r = post("/v1/completions", {{"prompt", "In the beginning"}, {"max_tokens", 4}, {"temperature", 0},
                                          {"ignore_eos", true}, {"logit_bias", {{std::to_string(kToken), 100}}}});
  EXPECT_EQ(r["choices"][0]["text"], server_->model().tokenizer().decode({kToken, kToken, kToken, kToken}));
}

TEST_F(OpenAiApi, SeededSamplingRepeatsAndChoicesDiffer) {
  const json request = {{"prompt", "Blessed are the"}, {"max_tokens", 16}, {"temperature", 1.0}, {"seed", 42}, {"top_k", 50}, {"min_p", 0.01}};
  EXPECT_EQ(post("/v1/completions", request)["choices"], post("/v1/completions", request)["choices"]);
  json two = request;
  two["n"] = 2;
  const json r = post("/v1/completions", two);
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["usage"]["prompt_tokens"], 4);  // the prompt counts once
}

TEST_F(OpenAiApi, LogprobsInBothShapes) {
  const json chat = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 3},
                                                  {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}});
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content.empty());
  EXPECT_LE(content[0]["logprob"].get<double>(), 0);
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["token"], content[0]["top_logprobs"][0]["token"]);  // greedy
  const json completion = post("/v1/completions", {{"prompt", "In the"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 1}});
  const json& lp = completion["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), 3u);
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST_F(OpenAiApi, TokenIdPromptsAndBatchesOfPrompts) {
  const json ids = post("/v1/completions", {{"prompt", {4091, 818, 262}}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(ids["usage"]["prompt_tokens"], 3);
  const json batch = post("/v1/completions", {{"prompt", {"In the beginning", "Blessed are the"}}, {"max_tokens", 4}, {"temperature", 0}});
  ASSERT_EQ(batch["choices"].size(), 2u);
  EXPECT_EQ(batch["choices"][1]["index"], 1);
  const json echo = post("/v1/completions", {{"prompt", "In the beginning"}, {"max_tokens", 2}, {"temperature", 0}, {"echo", true}});
  EXPECT_TRUE(echo["choices"][0]["text"].get<std::string>().starts_with("In the beginning"));
}

}  // namespace
}  // namespace rf::server::testing
