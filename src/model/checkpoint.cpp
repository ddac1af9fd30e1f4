#include "model/checkpoint.h"

#include <climits>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "util/error.h"
#include "util/numeric_fit.h"

namespace rf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

GenerationDefaults read_generation_config(const fs::path& path, std::vector<std::int32_t>& eos_ids) {
  GenerationDefaults g;
  if (!fs::exists(path)) return g;
  const json j = read_json_file(path.string());
  if (!j.is_object()) fail("{}: expected a JSON object", path.string());
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) fail("{}: \"{}\" must be a number", path.string(), key);
    return it->get<double>();
  };
  g.temperature = number("temperature");
  g.top_p = number("top_p");
  g.min_p = number("min_p");
  g.repetition_penalty = number("repetition_penalty");
  if (auto k = number("top_k")) {
    if (*k < 0 || *k != std::floor(*k) || !fits_in<int>(*k)) {
      fail("{}: \"top_k\" must be a whole number from 0 to {}, got {}", path.string(), INT_MAX, *k);
    }
    g.top_k = static_cast<int>(*k);
  }
  if (auto it = j.find("do_sample"); it != j.end() && it->is_boolean()) g.do_sample = it->get<bool>();
  // generation_config.json's eos ids (often a list with end-of-turn tokens) take precedence.
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    eos_ids = json_token_ids(j, "eos_token_id", path.string());
  }
  return g;
}

}  // namespace

Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;

Checkpoint Checkpoint::load(const std::string& path) {
  Checkpoint ckpt;
  ckpt.path_ = path;
  if (fs::is_directory(path)) {
    const fs::path folder(path);
    ckpt.format_ = CheckpointFormat::HuggingFace;
    const fs::path config_path = folder / "config.json";
    if (!fs::exists(config_path)) fail("{}: no config.json: not a Hugging Face model folder", path);
    ckpt.config_ = config_from_hf(read_json_file(config_path.string()), config_path.string());
    ckpt.generation_ = read_generation_config(folder / "generation_config.json", ckpt.config_.eos_token_ids);
    ckpt.tokenizer_json_ = (folder / "tokenizer.json").string();
    ckpt.safetensors_ = std::make_unique<SafetensorsSet>(path);
    ckpt.tensors_ = TensorSet(*ckpt.safetensors_);
    ckpt.weights_ = llama::read_weights(ckpt.tensors_, ckpt.config_, llama::Naming::HuggingFace);
  } else if (fs::exists(path)) {
    ckpt.format_ = CheckpointFormat::Gguf;
    ckpt.gguf_ = std::make_unique<GgufFile>(path);
    ckpt.config_ = config_from_gguf(*ckpt.gguf_);
    ckpt.tensors_ = TensorSet(*ckpt.gguf_);
    ckpt.weights_ = llama::read_weights(ckpt.tensors_, ckpt.config_, llama::Naming::Gguf);
  } else {
    fail("{}: no such file or folder", path);
  }
  return ckpt;
}

Checkpoint Checkpoint::from_memory(std::string name, ModelConfig config, LlamaWeights weights,
                                   std::vector<std::vector<std::uint8_t>> storage) {
  Checkpoint ckpt;
  ckpt.path_ = std::move(name);
  ckpt.format_ = CheckpointFormat::Memory;
  ckpt.config_ = std::move(config);
  ckpt.weights_ = std::move(weights);
  ckpt.storage_ = std::move(storage);
  ckpt.tensors_ = llama::tensor_set(ckpt.weights_, ckpt.config_, llama::Naming::Gguf, ckpt.path_);
  return ckpt;
}

std::size_t Checkpoint::parameter_count() const { return llama::parameter_count(weights_, config_); }

std::size_t Checkpoint::weight_bytes() const { return llama::matrix_bytes(weights_, config_); }

std::string Checkpoint::dtype_summary() const { return llama::dtype_summary(weights_, config_); }

}  // namespace rf
