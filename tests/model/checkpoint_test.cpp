#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"

namespace rf {
namespace {

const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

std::set<std::string> names_of(const TensorSet& set) {
  std::set<std::string> names;
  for (const auto& view : set) names.insert(view.name);
  return names;
}

TEST(Checkpoint, ShardedFolderExposesEveryTensorOfItsIndex) {
  const Checkpoint ckpt = Checkpoint::load(kModels + "qwen3");
  std::ifstream in(kModels + "qwen3/model.safetensors.index.json");
  const auto index = nlohmann::json::parse(in);
  std::set<std::string> indexed;
  for (const auto& [name, shard] : index["weight_map"].items()) indexed.insert(name);
  EXPECT_EQ(names_of(ckpt.tensors()), indexed);
  EXPECT_EQ(ckpt.tensors().source(), kModels + "qwen3");
  EXPECT_EQ(ckpt.tensors().at("model.embed_tokens.weight").data, ckpt.weights().token_embedding.data);
}

TEST(Checkpoint, GgufExposesEveryTensorOfTheFile) {
  const std::string path = kModels + "llama3/model.q4_k_m.gguf";
  const Checkpoint ckpt = Checkpoint::load(path);
  const GgufFile gguf(path);
  ASSERT_EQ(ckpt.tensors().size(), gguf.tensors().size());
  auto view = ckpt.tensors().begin();
  for (const auto& t : gguf.tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(view->name, t.name);  // in file order
    EXPECT_EQ(view->dtype, t.dtype);
    EXPECT_EQ(view->bytes, t.size_bytes);
    ++view;
  }
  EXPECT_EQ(ckpt.tensors().at("output.weight").data, ckpt.weights().output.data);
}

TEST(Checkpoint, BuiltInMemoryExposesItsWeightsUnderGgufNames) {
  const Checkpoint file = Checkpoint::load(kModels + "qwen2/model.gguf");
  const Checkpoint memory = Checkpoint::from_memory("synthetic qwen2", file.config(), file.weights(), {});
  EXPECT_EQ(memory.tensors().source(), "synthetic qwen2");
  EXPECT_EQ(names_of(memory.tensors()), names_of(file.tensors()));  // tied: no output.weight in either
  const TensorView& bias = memory.tensors().at("blk.0.attn_k.bias");
  EXPECT_EQ(bias.data, memory.weights().layers[0].bk->data());
  EXPECT_EQ(bias.n_dims, 1);
  EXPECT_EQ(bias.shape[0], static_cast<std::uint64_t>(file.config().kv_dim()));
}

}  // namespace
}  // namespace rf
