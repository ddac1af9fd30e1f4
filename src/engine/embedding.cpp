#include "engine/embedding.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "util/error.h"

namespace rf {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json value = json::parse(in, nullptr, false);
  if (value.is_discarded()) fail("{} is not valid JSON", path.string());
  return value;
}

// sentence-transformers' modules.json: its Pooling module's config and whether a Normalize follows.
void read_sentence_transformers(const fs::path& folder, EmbeddingStyle& style) {
  const auto modules = read_json(folder / "modules.json");
  if (!modules || !modules->is_array()) return;
  style.normalize = false;
  for (const auto& module : *modules) {
    const std::string type = module.value("type", "");
    if (type.ends_with(".Normalize")) style.normalize = true;
    if (!type.ends_with(".Pooling")) continue;
    const auto config = read_json(folder / module.value("path", "") / "config.json");
    if (!config) fail("{}: the Pooling module's config.json is missing", (folder / module.value("path", "")).string());
    auto mode = [&](const char* key) { return config->value(key, false); };
    if (mode("pooling_mode_lasttoken")) style.pooling = Pooling::Last;
    else if (mode("pooling_mode_mean_tokens")) style.pooling = Pooling::Mean;
    else if (mode("pooling_mode_cls_token")) style.pooling = Pooling::First;
    else fail("{}: the checkpoint pools in a way rocmforge does not (last token, mean or CLS)", folder.string());
  }
}

}  // namespace

const char* to_string(Pooling pooling) {
  switch (pooling) {
    case Pooling::Mean: return "mean";
    case Pooling::First: return "cls";
    case Pooling::Last: break;
  }
  return "last";
}

EmbeddingStyle embedding_style(const Checkpoint& checkpoint) {
  EmbeddingStyle style;
  if (const GgufFile* gguf = checkpoint.gguf()) {
    const auto arch = gguf->get_string_opt("general.architecture").value_or("");
    // llama.cpp's enum llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
    switch (gguf->get_uint_opt(arch + ".pooling_type").value_or(3)) {
      case 1: style.pooling = Pooling::Mean; break;
      case 2: style.pooling = Pooling::First; break;
      case 3: style.pooling = Pooling::Last; break;
      default: fail("{}: {}.pooling_type asks for a pooling rocmforge does not do (last token, mean or CLS)",
                    checkpoint.path(), arch);
    }
    return style;
  }
  const fs::path folder = checkpoint.path();
  read_sentence_transformers(folder, style);
  if (const auto config = read_json(folder / "config.json")) {
    style.truncatable = config->value("is_matryoshka", false) || config->contains("matryoshka_dimensions");
  }
  return style;
}

EmbeddingPooler::EmbeddingPooler(Pooling pooling, std::size_t hidden, std::size_t tokens)
    : pooling_(pooling), tokens_(tokens), sum_(hidden, 0.0) {}

bool EmbeddingPooler::wants(std::size_t token) const {
  switch (pooling_) {
    case Pooling::Mean: return true;
    case Pooling::First: return token == 0;
    case Pooling::Last: break;
  }
  return token + 1 == tokens_;
}

void EmbeddingPooler::add(std::span<const float> row) {
  for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += row[i];
  ++rows_;
}

std::vector<float> EmbeddingPooler::result(bool normalize) const {
  std::vector<float> out(sum_.size());
  const double scale = rows_ > 0 ? 1.0 / static_cast<double>(rows_) : 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sum_[i] * scale);
  if (normalize) normalize_l2(out);
  return out;
}

void normalize_l2(std::span<float> vector) {
  double squares = 0;
  for (const float v : vector) squares += static_cast<double>(v) * v;
  if (squares == 0) return;
  const double scale = 1.0 / std::sqrt(squares);
  for (float& v : vector) v = static_cast<float>(v * scale);
}

}  // namespace rf
