#include "model/config.h"

#include <cmath>
#include <numbers>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace rf {
namespace {

using nlohmann::json;

json llama31_legacy() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "eos_token_id": [128001, 128008, 128009]})");
}

TEST(Config, ReadsTheCommonLayout) {
  const auto c = config_from_hf(llama31_legacy(), "config.json");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::Llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int32_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.rope_layout, RopeLayout::SplitHalves);
}

TEST(Config, ReadsTheTransformers5Layout) {
  json j = llama31_legacy();
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  const auto a = config_from_hf(llama31_legacy(), "a");
  const auto b = config_from_hf(j, "b");
  EXPECT_DOUBLE_EQ(b.rope_theta, a.rope_theta);
  EXPECT_EQ(b.rope_scaling.kind, a.rope_scaling.kind);
  EXPECT_EQ(rope_inv_freq(a), rope_inv_freq(b));
}

TEST(Config, Qwen3HasExplicitHeadDimAndQkNorm) {
  const json j = json::parse(R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000, "tie_word_embeddings": true})");
  const auto c = config_from_hf(j, "config.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 2048);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST(Config, SlidingWindowOnlyWhereItApplies) {
  json mistral = llama31_legacy();
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 4096;
  EXPECT_EQ(config_from_hf(mistral, "m").sliding_window, 4096);
  mistral["sliding_window"] = nullptr;
  EXPECT_FALSE(config_from_hf(mistral, "m").sliding_window);
  json qwen2 = llama31_legacy();
  qwen2["model_type"] = "qwen2";
  qwen2["sliding_window"] = 4096;
  qwen2["use_sliding_window"] = false;
  EXPECT_FALSE(config_from_hf(qwen2, "q").sliding_window);
}

TEST(Config, Llama3ScalingFollowsTheBands) {
  const auto c = config_from_hf(llama31_legacy(), "config.json");
  const auto scaled = rope_inv_freq(c);
  for (int i = 0; i < c.head_dim / 2; ++i) {
    const double base = 1.0 / std::pow(500000.0, 2.0 * i / c.head_dim);
    const double wavelen = 2 * std::numbers::pi / base;
    if (wavelen < 8192 / 4.0) {
      EXPECT_NEAR(scaled[i], base, base * 1e-6) << i;  // high frequencies kept
    }
    if (wavelen > 8192 / 1.0) {
      EXPECT_NEAR(scaled[i], base / 8, base * 1e-6) << i;  // low frequencies slowed 8x
    }
  }
}

TEST(Config, RejectsBadConfigsNamingTheProblem) {
  auto expect_error = [](json j, const std::string& needle) {
    try {
      config_from_hf(j, "my/config.json");
      FAIL() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("my/config.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  json j = llama31_legacy();
  j["model_type"] = "gpt2";
  expect_error(j, "gpt2");
  j = llama31_legacy();
  j.erase("hidden_size");
  expect_error(j, "hidden_size");
  j = llama31_legacy();
  j["num_key_value_heads"] = 5;
  expect_error(j, "key/value heads");
  j = llama31_legacy();
  j["vocab_size"] = "many";
  expect_error(j, "vocab_size");
  j = llama31_legacy();
  j["rope_scaling"]["rope_type"] = "yarn";
  expect_error(j, "yarn");
  j = llama31_legacy();
  j["hidden_act"] = "gelu";
  expect_error(j, "gelu");
  expect_error(json::array(), "object");
}

}  // namespace
}  // namespace rf
