// Which layers are sparse and how wide their experts are, as transformers reads Mixtral's and Qwen3-MoE's configs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "util/error.h"

namespace rf {
namespace {

nlohmann::json base(const char* type) {
  return {{"model_type", type}, {"vocab_size", 64}, {"hidden_size", 32}, {"intermediate_size", 64},
          {"num_hidden_layers", 4}, {"num_attention_heads", 2}, {"num_key_value_heads", 1}};
}

TEST(MoeConfig, MixtralDefaultsToEightExpertsTopTwoOnEveryLayer) {
  const ModelConfig c = config_from_hf(base("mixtral"), "config.json");
  EXPECT_EQ(c.arch, Arch::Mixtral);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 2);
  EXPECT_EQ(c.expert_ffn, 64);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_layers, std::vector<bool>(4, true));
}

TEST(MoeConfig, Qwen3MoeSparseStepAndDenseLayers) {
  auto j = base("qwen3_moe");
  j.update({{"num_experts", 16}, {"num_experts_per_tok", 4}, {"moe_intermediate_size", 32},
            {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}});
  const ModelConfig c = config_from_hf(j, "config.json");
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.expert_ffn, 32);
  EXPECT_FALSE(c.norm_topk_prob);  // transformers' default; the released models set it
  EXPECT_EQ(c.moe_layers, (std::vector<bool>{false, true, false, false}));
}

TEST(MoeConfig, NoExpertsIsDenseAndBadCountsAreRefused) {
  auto dense = base("qwen3_moe");
  dense["num_experts"] = 0;
  EXPECT_EQ(config_from_hf(dense, "config.json").n_experts, 0);
  EXPECT_TRUE(config_from_hf(dense, "config.json").moe_layers.empty());
  auto too_many = base("mixtral");
  too_many["num_experts_per_tok"] = 9;
  EXPECT_THROW(config_from_hf(too_many, "config.json"), Error);
  auto bad_layer = base("qwen3_moe");
  bad_layer["mlp_only_layers"] = {4};
  EXPECT_THROW(config_from_hf(bad_layer, "config.json"), Error);
}

}  // namespace
}  // namespace rf
