#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "util/error.h"

namespace rf {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(ROCMFORGE_FIXTURES) + "/models/";

// The mistral_window fixture (linked file by file) with `file` holding `text` instead.
fs::path fixture_with(const std::string& test, const std::string& file, const std::string& text) {
  const fs::path dir = fs::path(ROCMFORGE_SCRATCH) / "checkpoint" / test;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(kModels + "mistral_window")) {
    if (entry.path().filename() != file) fs::create_symlink(fs::absolute(entry.path()), dir / entry.path().filename());
  }
  std::ofstream(dir / file) << text;
  return dir;
}

std::string load_error(const fs::path& dir) {
  try {
    Checkpoint::load(dir.string());
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

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

TEST(Checkpoint, FixtureLoadsFromItsLinkedCopy) {
  // The copy the malformed-file tests below start from loads when nothing is replaced.
  const auto dir = fixture_with("unchanged", "none", "");
  EXPECT_EQ(Checkpoint::load(dir.string()).config().n_layers, Checkpoint::load(kModels + "mistral_window").config().n_layers);
}

// A number no double holds is nlohmann's out_of_range, not a parse_error: it used to escape and
// abort the process (issue #29).
TEST(Checkpoint, NumberBeyondADoubleInAJsonFileIsAnError) {
  for (const char* file : {"config.json", "generation_config.json"}) {
    SCOPED_TRACE(file);
    const auto dir = fixture_with(std::string("huge_") + file, file, R"({"rope_theta": 1e400})");
    const std::string error = load_error(dir);
    EXPECT_NE(error.find((dir / file).string() + ": the file is not valid JSON"), std::string::npos) << error;
    EXPECT_NE(error.find("out_of_range"), std::string::npos) << error;
  }
}

// top_k used to be cast to int unchecked: undefined behaviour for 1e30.
TEST(Checkpoint, GenerationConfigNumbersAreRangeChecked) {
  for (const char* top_k : {"1e30", "-1", "2.5", "2147483648"}) {
    SCOPED_TRACE(top_k);
    const auto dir = fixture_with("top_k", "generation_config.json", fmt::format(R"({{"top_k": {}}})", top_k));
    EXPECT_NE(load_error(dir).find("\"top_k\" must be a whole number from 0 to 2147483647"), std::string::npos)
        << load_error(dir);
  }
  const auto eos = fixture_with("eos", "generation_config.json", R"({"eos_token_id": [2, 1099511627776]})");
  EXPECT_NE(load_error(eos).find("\"eos_token_id\" must hold token ids, got 1099511627776"), std::string::npos)
      << load_error(eos);
  const auto fine = fixture_with("top_k_fine", "generation_config.json", R"({"top_k": 2147483647})");
  EXPECT_EQ(Checkpoint::load(fine.string()).generation_defaults().top_k, 2147483647);
}

}  // namespace
}  // namespace rf
