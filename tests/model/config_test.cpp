#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/test_helpers.h"
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
  EXPECT_EQ(config_from_hf(mistral, "m").layer_windows, std::vector<int>(32, 4096));
  EXPECT_EQ(config_from_hf(mistral, "m").smallest_window(), 4096);
  mistral["sliding_window"] = nullptr;
  EXPECT_TRUE(config_from_hf(mistral, "m").layer_windows.empty());
  EXPECT_EQ(config_from_hf(mistral, "m").smallest_window(), 0);
  json qwen2 = llama31_legacy();
  qwen2["model_type"] = "qwen2";
  qwen2["sliding_window"] = 4096;
  qwen2["use_sliding_window"] = false;
  EXPECT_TRUE(config_from_hf(qwen2, "q").layer_windows.empty());
  // transformers' Qwen2: the layers from max_window_layers on slide
  qwen2["use_sliding_window"] = true;
  qwen2["max_window_layers"] = 28;
  std::vector<int> expected(32, 0);
  std::fill(expected.begin() + 28, expected.end(), 4096);
  EXPECT_EQ(config_from_hf(qwen2, "q").layer_windows, expected);
}

// Gemma 2 2B's config.json as published (transformers 4.42 layout).
json gemma2_2b() {
  return json::parse(R"({
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "intermediate_size": 9216,
    "max_position_embeddings": 8192, "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
    "torch_dtype": "float32", "vocab_size": 256000, "eos_token_id": [1, 107]})");
}

TEST(Config, ReadsGemma2) {
  const auto c = config_from_hf(gemma2_2b(), "config.json");
  EXPECT_EQ(c.arch, Arch::Gemma2);
  EXPECT_EQ(c.activation, MlpActivation::GeluTanh);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.tie_word_embeddings);  // transformers' Gemma default
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.embedding_scale, 48.0f);
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / 16);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30.0);
  EXPECT_FALSE(c.rope_local_theta);
  ASSERT_EQ(c.layer_windows.size(), 26u);
  for (int i = 0; i < 26; ++i) EXPECT_EQ(c.window(i), i % 2 == 0 ? 4096 : 0) << "layer " << i;  // even layers slide
}

TEST(Config, Gemma2LayerTypesNullCapsAndDtypes) {
  json j = gemma2_2b();
  j["layer_types"] = json::array();
  for (int i = 0; i < 26; ++i) j["layer_types"].push_back(i == 3 ? "sliding_attention" : "full_attention");
  j["attn_logit_softcapping"] = nullptr;
  j.erase("final_logit_softcapping");
  j["hidden_size"] = 3584;  // Gemma 2 9B: sqrt(3584) = 59.87, 59.75 in bf16 as transformers rounds it
  j["torch_dtype"] = "bfloat16";
  const auto c = config_from_hf(j, "config.json");
  EXPECT_EQ(c.smallest_window(), 4096);
  EXPECT_EQ(std::ranges::count(c.layer_windows, 4096), 1);
  EXPECT_EQ(c.window(3), 4096);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 0.0);    // null: off
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30.0);  // absent: transformers' default
  EXPECT_EQ(c.embedding_scale, 59.75f);
  j["torch_dtype"] = "float32";
  EXPECT_FLOAT_EQ(config_from_hf(j, "config.json").embedding_scale, std::sqrt(3584.0f));
}

// Gemma 3 1B's config.json as published (transformers 4.50 layout), with 4B's rope scaling.
json gemma3_text() {
  return json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "attn_logit_softcapping": null,
    "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "intermediate_size": 6912, "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26,
    "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000, "sliding_window": 512,
    "sliding_window_pattern": 6, "torch_dtype": "bfloat16", "vocab_size": 262144})");
}

TEST(Config, ReadsGemma3) {
  const auto c = config_from_hf(gemma3_text(), "config.json");
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 0.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::Linear);
  ASSERT_TRUE(c.rope_local_theta);
  EXPECT_DOUBLE_EQ(*c.rope_local_theta, 10000.0);
  for (int i = 0; i < 26; ++i) EXPECT_EQ(c.window(i), (i + 1) % 6 == 0 ? 0 : 512) << "layer " << i;  // 5 local : 1 global
  // the global layers' frequencies are scaled, the local ones' are not
  const auto global = rope_inv_freq(c), local = rope_inv_freq_local(c);
  EXPECT_FLOAT_EQ(global[1], static_cast<float>(1.0 / std::pow(1e6, 2.0 / 256)) / 8);
  EXPECT_FLOAT_EQ(local[1], static_cast<float>(1.0 / std::pow(1e4, 2.0 / 256)));
}

TEST(Config, ReadsGemma3InTheTransformers5Layout) {
  json j = gemma3_text();
  j["rope_parameters"] = json::parse(R"({"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000},
                                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000}})");
  j["layer_types"] = json::array();
  for (int i = 0; i < 26; ++i) j["layer_types"].push_back((i + 1) % 6 ? "sliding_attention" : "full_attention");
  for (const char* key : {"rope_theta", "rope_scaling", "rope_local_base_freq", "sliding_window_pattern"}) j.erase(key);
  const auto a = config_from_hf(gemma3_text(), "a"), b = config_from_hf(j, "b");
  EXPECT_EQ(a.layer_windows, b.layer_windows);
  EXPECT_EQ(rope_inv_freq(a), rope_inv_freq(b));
  EXPECT_EQ(rope_inv_freq_local(a), rope_inv_freq_local(b));
}

// gemma-3-4b-it's config.json as published: the language model's config leans on transformers'
// Gemma3TextConfig defaults for all but a few keys.
TEST(Config, ReadsTheLanguageModelOfAMultimodalGemma3) {
  const json j = json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144, "mm_tokens_per_image": 256,
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "model_type": "siglip_vision_model"}})");
  const auto c = config_from_hf(j, "config.json");
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.n_layers, 34);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<std::int32_t>{1, 106}));
  EXPECT_EQ(c.embedding_scale, 50.5f);  // sqrt(2560) = 50.596 in bf16
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / 16);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::Linear);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(*c.rope_local_theta, 1e4);
  for (int i = 0; i < 34; ++i) EXPECT_EQ(c.window(i), (i + 1) % 6 == 0 ? 0 : 1024) << "layer " << i;
}

// A model fixture's config as its folder's config.json and as its model.gguf give it.
struct HfAndGguf {
  ModelConfig hf, gg;
};

HfAndGguf fixture_configs(const std::string& model) {
  const std::string folder = std::string(ROCMFORGE_FIXTURES) + "/models/" + model;
  std::ifstream in(folder + "/config.json");
  return {config_from_hf(json::parse(in), "config.json"), config_from_gguf(GgufFile(folder + "/model.gguf"))};
}

// The fixtures' GGUFs, written by llama.cpp's converter, describe the model their folders do.
TEST(Config, GemmaGgufsMatchTheirHuggingFaceConfigs) {
  for (const char* model : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(model);
    const auto [hf, gg] = fixture_configs(model);
    EXPECT_EQ(gg.arch, hf.arch);
    EXPECT_EQ(gg.layer_windows, hf.layer_windows);
    EXPECT_FALSE(hf.layer_windows.empty());
    EXPECT_EQ(gg.activation, hf.activation);
    EXPECT_EQ(gg.post_norms, hf.post_norms);
    EXPECT_EQ(gg.qk_norm, hf.qk_norm);
    EXPECT_EQ(gg.tie_word_embeddings, hf.tie_word_embeddings);
    EXPECT_EQ(gg.embedding_scale, hf.embedding_scale);
    EXPECT_DOUBLE_EQ(gg.attention_scale(), hf.attention_scale());
    EXPECT_DOUBLE_EQ(gg.attn_logit_softcap, hf.attn_logit_softcap);
    EXPECT_DOUBLE_EQ(gg.final_logit_softcap, hf.final_logit_softcap);
    EXPECT_EQ(gg.rope_layout, hf.rope_layout);
    EXPECT_EQ(rope_inv_freq(gg), rope_inv_freq(hf));
    EXPECT_EQ(rope_inv_freq_local(gg), rope_inv_freq_local(hf));
  }
}

class GemmaGgufDefaults : public test::ScratchTest {
 protected:
  // GGUF metadata of a Gemma model with only the keys every file has (no window, no soft-caps).
  ModelConfig read(const std::string& arch, int layers, int hidden, int heads, int head_dim) {
    GgufWriter w;
    const auto u32 = [](std::uint64_t v) { return GgufValue{GgufType::U32, v}; };
    w.set("general.architecture", {GgufType::STRING, arch});
    w.set(arch + ".embedding_length", u32(hidden));
    w.set(arch + ".feed_forward_length", u32(4 * hidden));
    w.set(arch + ".block_count", u32(layers));
    w.set(arch + ".attention.head_count", u32(heads));
    w.set(arch + ".attention.head_count_kv", u32(heads / 2));
    w.set(arch + ".attention.key_length", u32(head_dim));
    w.set(arch + ".context_length", u32(8192));
    w.set(arch + ".vocab_size", u32(256000));
    w.write(path("m.gguf"));
    return config_from_gguf(GgufFile(path("m.gguf")));
  }
};

// What llama.cpp assumes where the file says nothing (llama-model.cpp, and the 27B models' scale).
TEST_F(GemmaGgufDefaults, AreLlamaCpps) {
  const auto gemma2 = read("gemma2", 26, 2304, 8, 256);  // Gemma 2 2B
  EXPECT_DOUBLE_EQ(gemma2.attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(gemma2.final_logit_softcap, 30.0);
  for (int i = 0; i < 26; ++i) EXPECT_EQ(gemma2.window(i), i % 2 == 0 ? 4096 : 0) << "layer " << i;
  EXPECT_DOUBLE_EQ(gemma2.attention_scale(), 1.0 / 16);
  EXPECT_EQ(gemma2.embedding_scale, 48.0f);
  const auto gemma2_27b = read("gemma2", 46, 4608, 32, 128);
  EXPECT_DOUBLE_EQ(gemma2_27b.attention_scale(), 1.0 / 12);  // (4608 / 32)^-1/2, not 128^-1/2
  const auto gemma3 = read("gemma3", 26, 1152, 4, 256);
  EXPECT_TRUE(gemma3.layer_windows.empty());  // llama.cpp: no window named, none used
  EXPECT_DOUBLE_EQ(gemma3.attn_logit_softcap, 0.0);
  EXPECT_DOUBLE_EQ(gemma3.final_logit_softcap, 0.0);
  EXPECT_TRUE(gemma3.qk_norm);
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

// Phi-3.5-mini-instruct's config.json (its 48 short and long factors shortened to their shape here:
// the first and last of each, the rest 1 and 2), and Phi-4-mini-instruct's differences.
json phi35_mini() {
  json j = json::parse(R"({
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_act": "silu", "hidden_size": 3072,
    "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "vocab_size": 32064, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": false,
    "bos_token_id": 1, "eos_token_id": 32000, "pad_token_id": 32000, "torch_dtype": "bfloat16"})");
  std::vector<double> short_factor(48, 1.0), long_factor(48, 2.0);
  short_factor.front() = 1.0, short_factor.back() = 2.7, long_factor.front() = 1.08, long_factor.back() = 64.0;
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor}};
  return j;
}

json phi4_mini() {
  json j = phi35_mini();
  j.update(json::parse(R"({"hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
    "vocab_size": 200064, "partial_rotary_factor": 0.75, "tie_word_embeddings": true, "sliding_window": 262144})"));
  return j;
}

TEST(Config, ReadsPhi3LongRope) {
  const auto c = config_from_hf(phi35_mini(), "config.json");
  EXPECT_EQ(c.arch, Arch::Phi3);
  EXPECT_EQ(c.head_dim, 96);
  EXPECT_EQ(c.rope_dims(), 96);
  EXPECT_EQ(c.rope_scaling.kind, RopeScaling::Kind::LongRope);
  EXPECT_DOUBLE_EQ(c.rope_scaling.original_max_position, 4096);
  // transformers: sqrt(1 + ln(131072 / 4096) / ln(4096))
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
  EXPECT_DOUBLE_EQ(rope_attention_factor(c), c.rope_scaling.attention_factor);
  EXPECT_EQ(c.window(0), 262144);
  EXPECT_FALSE(c.tie_word_embeddings);
  // llama.cpp's rule: the short factors up to the original context, the long ones beyond it
  const auto base = [&](int i) { return static_cast<float>(1.0 / std::pow(10000.0, 2.0 * i / 96)); };
  for (const int context : {4096, 4097}) {
    const auto inv = rope_inv_freq(c, nullptr, context);
    const auto& factors = context > 4096 ? c.rope_scaling.long_factor : c.rope_scaling.short_factor;
    ASSERT_EQ(inv.size(), 48u);
    for (int i : {0, 47}) EXPECT_FLOAT_EQ(inv[i], base(i) / factors[i]) << "context " << context << " pair " << i;
  }
  json su = phi35_mini();
  su["rope_scaling"]["type"] = "su";  // the name of the first Phi-3 128k checkpoints
  EXPECT_EQ(config_from_hf(su, "config.json").rope_scaling.kind, RopeScaling::Kind::LongRope);
}

TEST(Config, ReadsPhi4MiniPartialRotary) {
  const auto c = config_from_hf(phi4_mini(), "config.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_dims(), 96);  // int(128 * 0.75)
  EXPECT_TRUE(c.tie_word_embeddings);
  const auto inv = rope_inv_freq(c, nullptr, 4096);
  ASSERT_EQ(inv.size(), 48u);
  // the exponent runs over the rotated dimensions: base^(-2i/96)
  EXPECT_FLOAT_EQ(inv[1], static_cast<float>(1.0 / std::pow(10000.0, 2.0 / 96)));
  // transformers 5 keeps partial_rotary_factor in rope_parameters
  json j = phi4_mini();
  j.erase("partial_rotary_factor");
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["partial_rotary_factor"] = 0.75;
  j["rope_parameters"]["rope_theta"] = 10000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  EXPECT_EQ(config_from_hf(j, "config.json").rope_dims(), 96);
}

// The fixtures' GGUFs, written by llama.cpp's converter (fused tensors, rope_factors_long/short).
TEST(Config, PhiGgufsMatchTheirHuggingFaceConfigs) {
  for (const char* model : {"phi3", "phi3_short"}) {
    SCOPED_TRACE(model);
    const auto [hf, gg] = fixture_configs(model);
    EXPECT_EQ(gg.arch, Arch::Phi3);
    EXPECT_EQ(gg.rope_layout, RopeLayout::SplitHalves);  // llama.cpp's NeoX mode for phi3, rows unpermuted
    EXPECT_EQ(gg.layer_windows, hf.layer_windows);
    EXPECT_EQ(gg.rope_scaling.kind, RopeScaling::Kind::LongRope);
    EXPECT_EQ(gg.rope_scaling.short_factor, hf.rope_scaling.short_factor);
    EXPECT_EQ(gg.rope_scaling.long_factor, hf.rope_scaling.long_factor);
    EXPECT_DOUBLE_EQ(gg.rope_scaling.original_max_position, hf.rope_scaling.original_max_position);
    // the converter stores the attention factor as f32
    EXPECT_NEAR(gg.rope_scaling.attention_factor, hf.rope_scaling.attention_factor, 1e-7);
    for (const int context : {16, 17, 512, 513}) EXPECT_EQ(rope_inv_freq(gg, nullptr, context), rope_inv_freq(hf, nullptr, context));
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
  json j = phi35_mini();
  j["rope_scaling"]["long_factor"] = std::vector<double>(47, 1.0);
  expect_error(j, "48 entries");
  j = phi4_mini();  // 96 rotated dimensions: 48 pairs, not 64
  j["rope_scaling"]["short_factor"] = std::vector<double>(64, 1.0);
  expect_error(j, "48 entries");
  j = phi35_mini();
  j["rope_scaling"].erase("short_factor");
  expect_error(j, "short_factor");
  j = phi35_mini();
  j["partial_rotary_factor"] = 1.5;
  expect_error(j, "partial_rotary_factor");
  j = llama31_legacy();
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
  j = gemma3_text();
  j["model_type"] = "gemma3";  // a multimodal checkpoint's, without its text_config
  expect_error(j, "text_config");
  j = gemma2_2b();
  j["layer_types"] = json::array({"sliding_attention"});
  expect_error(j, "layer_types");
  j = gemma2_2b();
  j["layer_types"] = std::vector<std::string>(26, "chunked_attention");
  expect_error(j, "chunked_attention");
  j = gemma2_2b();
  j["hidden_activation"] = "gelu";
  expect_error(j, "gelu");
}

}  // namespace
}  // namespace rf
