// The synthetic models' configs are the published shapes', Gemma's pieces included, as its checkpoints
// and llama.cpp's GGUF reader set them (tests/model/config_test.cpp reads the real configs).
#include <gtest/gtest.h>

#include "engine/synthetic_model.h"

namespace rf {
namespace {

TEST(SyntheticModel, EveryShapeValidates) {
  for (const std::string& name : synthetic_model_names()) EXPECT_NO_THROW(synthetic_model_config(name)) << name;
}

TEST(SyntheticModel, Gemma2HasItsWindowsCapsAndScales) {
  const ModelConfig c = synthetic_model_config("gemma2-2b");
  EXPECT_EQ(c.head_dim, 256);
  for (int l = 0; l < c.n_layers; ++l) EXPECT_EQ(c.window(l), l % 2 == 0 ? 4096 : 0) << "layer " << l;
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30.0);
  EXPECT_EQ(c.embedding_scale, 48.0f);
  EXPECT_DOUBLE_EQ(c.attention_scale(), 1.0 / 16);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.activation, MlpActivation::GeluTanh);
  EXPECT_FALSE(c.qk_norm);
}

TEST(SyntheticModel, Gemma3SlidesFiveLayersInSix) {
  const ModelConfig c = synthetic_model_config("gemma3-4b");
  for (int l = 0; l < c.n_layers; ++l) EXPECT_EQ(c.window(l), l % 6 < 5 ? 1024 : 0) << "layer " << l;
  EXPECT_EQ(c.rope_local_theta, 10000.0);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 0.0);
}

// The mixtures of experts: Mixtral 8x7B's 2 of 8 experts as wide as its dense MLP would be, and
// Qwen3-30B-A3B's 8 of 128 narrow ones with q/k norms; every layer sparse in both.
TEST(SyntheticModel, MixturesOfExpertsRouteAsPublished) {
  const ModelConfig mixtral = synthetic_model_config("mixtral-8x7b");
  EXPECT_EQ(mixtral.n_experts, 8);
  EXPECT_EQ(mixtral.n_experts_used, 2);
  EXPECT_EQ(mixtral.expert_ffn, 14336);
  const ModelConfig qwen = synthetic_model_config("qwen3-30b-a3b");
  EXPECT_EQ(qwen.n_experts, 128);
  EXPECT_EQ(qwen.n_experts_used, 8);
  EXPECT_EQ(qwen.expert_ffn, 768);
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_TRUE(qwen.norm_topk_prob);
  for (const ModelConfig* c : {&mixtral, &qwen}) {
    for (int l = 0; l < c->n_layers; ++l) EXPECT_TRUE(c->is_moe(l)) << arch_name(c->arch) << " layer " << l;
  }
}

}  // namespace
}  // namespace rf
