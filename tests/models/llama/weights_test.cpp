#include "models/llama/weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/test_helpers.h"
#include "model/config.h"

namespace rf {
namespace {

const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

ModelConfig hf_config(const std::string& model) {
  const std::string path = kModels + model + "/config.json";
  return config_from_hf(read_json(path), path);
}

bool same_bytes(const WeightMatrix& a, const WeightMatrix& b) {
  return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols && a.bytes() == b.bytes() &&
         std::memcmp(a.data, b.data, a.bytes()) == 0;
}

// A set of all of `from` but the tensor `drop`, with `replace` in place of its namesake.
TensorSet edited(const TensorSet& from, const std::string& drop, const TensorView* replace = nullptr) {
  TensorSet set(from.source());
  for (const auto& view : from) {
    if (replace && view.name == replace->name) {
      set.add(*replace);
    } else if (view.name != drop) {
      set.add(view);
    }
  }
  return set;
}

// qwen3 is stored unpermuted in both files (f32), so both namings must find the very same weights.
TEST(LlamaWeights, BothNamingsReadTheSameWeights) {
  const ModelConfig config = hf_config("qwen3");
  const SafetensorsSet shards(kModels + "qwen3");
  const GgufFile gguf(kModels + "qwen3/model.gguf");
  const LlamaWeights hf = llama::read_weights(TensorSet(shards), config, llama::Naming::HuggingFace);
  const LlamaWeights gg = llama::read_weights(TensorSet(gguf), config, llama::Naming::Gguf);

  EXPECT_EQ(hf.token_embedding.data, shards.get("model.embed_tokens.weight").data);
  EXPECT_EQ(hf.output.data, hf.token_embedding.data);  // tied
  EXPECT_TRUE(same_bytes(hf.token_embedding, gg.token_embedding));
  EXPECT_EQ(hf.output_norm, gg.output_norm);
  EXPECT_FALSE(gg.rope_freq_factors);
  ASSERT_EQ(hf.layers.size(), 2u);
  ASSERT_EQ(gg.layers.size(), 2u);
  for (std::size_t i = 0; i < hf.layers.size(); ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerWeights &a = hf.layers[i], &b = gg.layers[i];
    EXPECT_EQ(a.wq.rows, static_cast<std::size_t>(config.q_dim()));
    for (const auto& [x, y] : {std::pair(&a.wq, &b.wq), std::pair(&a.wk, &b.wk), std::pair(&a.wv, &b.wv),
                               std::pair(&a.wo, &b.wo), std::pair(&a.w_gate, &b.w_gate), std::pair(&a.w_up, &b.w_up),
                               std::pair(&a.w_down, &b.w_down)}) {
      EXPECT_TRUE(same_bytes(*x, *y));
    }
    EXPECT_EQ(a.attn_norm, b.attn_norm);
    EXPECT_EQ(a.ffn_norm, b.ffn_norm);
    ASSERT_TRUE(a.q_norm && b.q_norm && a.k_norm && b.k_norm);
    EXPECT_EQ(*a.q_norm, *b.q_norm);
    EXPECT_EQ(*a.k_norm, *b.k_norm);
    EXPECT_EQ(a.q_norm->size(), static_cast<std::size_t>(config.head_dim));
    EXPECT_FALSE(a.bq);
  }
  // The index records the parameter count transformers saw.
  const auto index = read_json(kModels + "qwen3/model.safetensors.index.json");
  EXPECT_EQ(llama::parameter_count(hf, config), index["metadata"]["total_parameters"].get<std::size_t>());
  EXPECT_EQ(llama::parameter_count(gg, config), llama::parameter_count(hf, config));
  EXPECT_EQ(llama::matrix_bytes(hf, config), 4 * (llama::parameter_count(hf, config) - config.hidden_size *
                                                   (1 + 2 * config.n_layers) - 2 * config.head_dim * config.n_layers));
  EXPECT_EQ(llama::dtype_summary(hf, config), "f32 100%");
}

TEST(LlamaWeights, ReadsRopeFactorsFromGguf) {
  const GgufFile gguf(kModels + "llama3/model.gguf");
  const ModelConfig config = config_from_gguf(gguf);
  const LlamaWeights w = llama::read_weights(TensorSet(gguf), config, llama::Naming::Gguf);
  ASSERT_TRUE(w.rope_freq_factors);
  ASSERT_EQ(w.rope_freq_factors->size(), 32u);
  std::vector<float> stored(32);
  std::memcpy(stored.data(), gguf.tensor("rope_freqs.weight").data, 32 * sizeof(float));
  EXPECT_EQ(*w.rope_freq_factors, stored);
  EXPECT_NE(w.output.data, w.token_embedding.data);  // untied
}

TEST(LlamaWeights, FailsNamingTheSourceAndTheTensor) {
  const ModelConfig config = hf_config("qwen3");
  const SafetensorsSet shards(kModels + "qwen3");
  const TensorSet all(shards);
  const std::string source = kModels + "qwen3";
  const auto read = [&](const TensorSet& set) { llama::read_weights(set, config, llama::Naming::HuggingFace); };

  EXPECT_RF_ERROR(read(edited(all, "model.layers.1.mlp.up_proj.weight")), source,
                  "tensor model.layers.1.mlp.up_proj.weight is missing");
  EXPECT_RF_ERROR(llama::read_weights(all, config, llama::Naming::Gguf), source, "tensor token_embd.weight is missing");

  TensorView wide = all.at("model.layers.0.self_attn.k_norm.weight");
  wide.shape[0] = 2 * wide.shape[0];
  EXPECT_RF_ERROR(read(edited(all, "", &wide)), source,
                  "tensor model.layers.0.self_attn.k_norm.weight has shape [64], expected [32] from the model's config");

  // Found by the gguf fuzz target: the layers were allocated by the config's count before any
  // tensor was looked for.
  ModelConfig deep = config;
  deep.n_layers = 1 << 30;
  EXPECT_RF_ERROR(llama::read_weights(all, deep, llama::Naming::HuggingFace), source,
                  fmt::format("the config names 1073741824 layers, but the checkpoint holds only {} tensors", all.size()));

  TensorView quantized = all.at("model.norm.weight");
  quantized.dtype = DType::Q8_0;
  EXPECT_RF_ERROR(read(edited(all, "", &quantized)), source,
                  "tensor model.norm.weight is q8_0; expected f32, f16, bf16 or f64");
}

// Weights built in memory list themselves as the GGUF file they would be.
TEST(LlamaWeights, TensorSetNamesEveryWeightAsGgufDoes) {
  const GgufFile gguf(kModels + "llama3/model.gguf");
  const ModelConfig config = config_from_gguf(gguf);
  const TensorSet file(gguf);
  const LlamaWeights w = llama::read_weights(file, config, llama::Naming::Gguf);
  const TensorSet listed = llama::tensor_set(w, config, llama::Naming::Gguf, "in memory");

  EXPECT_EQ(listed.source(), "in memory");
  ASSERT_EQ(listed.size(), file.size());
  for (const auto& view : file) {
    SCOPED_TRACE(view.name);
    const TensorView* mine = listed.find(view.name);
    ASSERT_NE(mine, nullptr);
    EXPECT_EQ(mine->dtype, view.dtype);
    EXPECT_EQ(mine->shape_string(), view.shape_string());
    ASSERT_EQ(mine->bytes, view.bytes);
    EXPECT_EQ(std::memcmp(mine->data, view.data, view.bytes), 0);
  }
  EXPECT_EQ(listed.at("blk.1.ffn_down.weight").data, file.at("blk.1.ffn_down.weight").data);  // matrices: the same bytes
}

}  // namespace
}  // namespace rf
