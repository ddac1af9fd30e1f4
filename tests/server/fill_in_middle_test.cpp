// A completion's suffix on a model with fill-in-the-middle tokens: the prompt the engine runs is
// <|fim_prefix|> prompt <|fim_suffix|> suffix <|fim_middle|>. The model is random weights of a small
// Qwen3 shape with Qwen3's real vocabulary (151,936 rows), built in memory.
#include <gtest/gtest.h>

#include "engine/synthetic_model.h"
#include "test_server.h"
#include "tokenizer/fill_in_middle.h"

namespace rf::server::testing {
namespace {

std::unique_ptr<ModelService> fim_service() {
  ModelConfig c = synthetic_model_config("qwen3-8b");
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.n_layers = 1;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  auto tokenizer = Tokenizer::from_json_file(std::string(ROCMFORGE_TOKENIZERS) + "/qwen3/tokenizer.json");
  auto runner = std::make_unique<ModelRunner>(build_synthetic_model(c, DType::BF16, 1, "qwen3-tiny"), std::move(tokenizer),
                                              RunnerOptions{.threads = 2, .ctx_size = 256, .kv_cache_tokens = 1024});
  return std::make_unique<ModelService>(std::move(runner), "coder", SchedulerOptions{});
}

TEST(FillInTheMiddleApi, ASuffixMakesAPrefixSuffixMiddlePrompt) {
  TestServer server(fim_service());
  const std::string prefix = "def add(a, b):\n    return ", suffix = "\n\nprint(add(1, 2))\n";
  const json body = {{"prompt", prefix}, {"suffix", suffix}, {"max_tokens", 4}, {"temperature", 0}};
  auto res = server.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto& tokenizer = server.model().tokenizer();
  const auto expected = fim_prompt(tokenizer, *server.model().fim(), prefix, suffix);
  EXPECT_EQ(json::parse(res->body)["usage"]["prompt_tokens"], expected.size());
  EXPECT_EQ(expected.front(), *tokenizer.token_to_id("<|fim_prefix|>"));
  EXPECT_EQ(expected.back(), *tokenizer.token_to_id("<|fim_middle|>"));
  // Without a suffix the same text is a plain prompt.
  res = server.client().Post("/v1/completions", json{{"prompt", prefix}, {"max_tokens", 1}}.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_EQ(json::parse(res->body)["usage"]["prompt_tokens"], tokenizer.encode(prefix, true).size());
  for (const auto& [bad, field] : {std::pair{json{{"prompt", {1, 2}}, {"suffix", "x"}}, "suffix"},
                                   std::pair{json{{"prompt", "x"}, {"suffix", "y"}, {"echo", true}}, "echo"}}) {
    res = server.client().Post("/v1/completions", bad.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_EQ(json::parse(res->body)["error"]["param"], field) << res->body;
  }
}

}  // namespace
}  // namespace rf::server::testing
