// The mixture-of-experts fixtures' configs and weights: a Hugging Face folder's per-expert tensors and
// llama.cpp's stacked GGUF tensors give the same experts, without copies.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "formats/tensor.h"
#include "model/checkpoint.h"

namespace rf {
namespace {

const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

bool same_bytes(const WeightMatrix& a, const WeightMatrix& b) {
  return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

// Every expert matrix of the folder equals the GGUF's, byte for byte (same stored type), the routers
// in value, and the GGUF's experts are slices of one stacked tensor.
void expect_same_experts(const std::string& model) {
  const Checkpoint hf = Checkpoint::load(kModels + model);
  const Checkpoint gguf = Checkpoint::load(kModels + model + "/model.gguf");
  const ModelConfig& c = hf.config();
  EXPECT_EQ(gguf.config().n_experts, c.n_experts);
  EXPECT_EQ(gguf.config().n_experts_used, c.n_experts_used);
  EXPECT_EQ(gguf.config().expert_ffn, c.expert_ffn);
  EXPECT_EQ(gguf.config().moe_layers, c.moe_layers);
  EXPECT_EQ(gguf.config().norm_topk_prob, c.norm_topk_prob);
  int compared = 0;
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerWeights& a = hf.weights().layers[i];
    const LayerWeights& b = gguf.weights().layers[i];
    if (!c.is_moe(i)) {
      EXPECT_TRUE(a.expert_gate.empty() && b.expert_gate.empty()) << "layer " << i;
      EXPECT_TRUE(same_bytes(a.w_down, b.w_down)) << "dense layer " << i;
      continue;
    }
    // llama.cpp's converter stores the routers in f32 whatever the checkpoint's type: same values
    const std::string router = c.arch == Arch::Mixtral ? "block_sparse_moe.gate" : "mlp.gate";
    EXPECT_EQ(to_f32("hf", *hf.tensors().find(fmt::format("model.layers.{}.{}.weight", i, router))),
              to_f32("gguf", *gguf.tensors().find(fmt::format("blk.{}.ffn_gate_inp.weight", i))))
        << "router of layer " << i;
    for (const auto& [x, y] : {std::pair{&a.expert_gate, &b.expert_gate}, std::pair{&a.expert_up, &b.expert_up},
                               std::pair{&a.expert_down, &b.expert_down}}) {
      ASSERT_EQ(x->size(), static_cast<std::size_t>(c.n_experts));
      ASSERT_EQ(y->size(), static_cast<std::size_t>(c.n_experts));
      EXPECT_EQ(llama::expert_stride(*y), (*y)[0].bytes()) << "the GGUF's experts lie back to back";
      for (int e = 0; e < c.n_experts; ++e) {
        EXPECT_TRUE(same_bytes((*x)[e], (*y)[e])) << "layer " << i << " expert " << e;
        ++compared;
      }
    }
  }
  fmt::print("{}: {} expert matrices identical in the folder and the GGUF\n", model, compared);
}

TEST(MoeCheckpoint, MixtralFolderAndGgufHoldTheSameExperts) {
  const Checkpoint hf = Checkpoint::load(kModels + "mixtral");
  EXPECT_EQ(hf.config().arch, Arch::Mixtral);
  EXPECT_EQ(Checkpoint::load(kModels + "mixtral/model.gguf").config().arch, Arch::Mixtral);
  EXPECT_EQ(hf.config().n_experts, 8);
  EXPECT_EQ(hf.config().n_experts_used, 2);
  EXPECT_EQ(hf.config().expert_ffn, hf.config().intermediate_size);
  expect_same_experts("mixtral");
}

TEST(MoeCheckpoint, Qwen3MoeFolderAndGgufHoldTheSameExpertsAndDenseLayer) {
  const Checkpoint ckpt = Checkpoint::load(kModels + "qwen3_moe");
  const ModelConfig& c = ckpt.config();
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 3);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.moe_layers, (std::vector<bool>{true, false, true}));  // mlp_only_layers [1]
  EXPECT_NE(c.expert_ffn, c.intermediate_size);
  expect_same_experts("qwen3_moe");
}

// Only the experts' share of the bytes counts n_experts_used / n_experts times.
TEST(MoeCheckpoint, ActiveBytesCountTheUsedExpertsOnly) {
  const Checkpoint ckpt = Checkpoint::load(kModels + "mixtral");
  const ModelConfig& c = ckpt.config();
  std::size_t experts = 0;
  for (const LayerWeights& l : ckpt.weights().layers) {
    for (const auto* set : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
      for (const WeightMatrix& m : *set) experts += m.bytes();
    }
  }
  EXPECT_EQ(llama::active_matrix_bytes(ckpt.weights(), c),
            ckpt.weight_bytes() - experts + experts * c.n_experts_used / c.n_experts);
}

}  // namespace
}  // namespace rf
