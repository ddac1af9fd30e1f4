#include "model/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "util/error.h"
#include "util/half.h"

namespace rf {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A tensor as either format stores it, with its shape in row-major order (outermost first).
struct StoredTensor {
  DType dtype;
  std::vector<std::uint64_t> shape;
  const void* data;
};

// Looks tensors up by their format-specific name; null when absent.
using TensorLookup = std::function<std::optional<StoredTensor>(const std::string&)>;

float plain_element(DType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DType::F16: return f16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

class WeightReader {
 public:
  WeightReader(TensorLookup lookup, std::string source) : lookup_(std::move(lookup)), source_(std::move(source)) {}

  bool has(const std::string& name) const { return lookup_(name).has_value(); }

  WeightMatrix matrix(const std::string& name, int rows, int cols) const {
    const StoredTensor t = get(name, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)});
    return {t.dtype, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), t.data};
  }

  Vector vector(const std::string& name, int n) const {
    const StoredTensor t = get(name, {static_cast<std::uint64_t>(n)});
    if (is_quantized(t.dtype)) fail("{}: tensor {} is {}; 1-D tensors must be f32, f16 or bf16", source_, name, dtype_name(t.dtype));
    Vector v(n);
    for (int i = 0; i < n; ++i) v[i] = plain_element(t.dtype, t.data, i);
    return v;
  }

  std::optional<Vector> optional_vector(const std::string& name, int n) const {
    if (!has(name)) return std::nullopt;
    return vector(name, n);
  }

 private:
  StoredTensor get(const std::string& name, const std::vector<std::uint64_t>& expected) const {
    auto t = lookup_(name);
    if (!t) fail("{}: tensor {} is missing", source_, name);
    if (t->shape != expected) {
      fail("{}: tensor {} has shape {}, expected {} from the model's config", source_, name, shape_string(t->shape),
           shape_string(expected));
    }
    return *t;
  }

  TensorLookup lookup_;
  std::string source_;
};

// Tensor names of one layer in each format.
struct LayerNames {
  std::string attn_norm, q, k, v, o, q_bias, k_bias, v_bias, q_norm, k_norm, ffn_norm, gate, up, down;
};

LayerNames hf_layer_names(int i) {
  const std::string p = fmt::format("model.layers.{}.", i);
  return {p + "input_layernorm.weight", p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
          p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight", p + "self_attn.q_proj.bias",
          p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias", p + "self_attn.q_norm.weight",
          p + "self_attn.k_norm.weight", p + "post_attention_layernorm.weight", p + "mlp.gate_proj.weight",
          p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"};
}

LayerNames gguf_layer_names(int i) {
  const std::string p = fmt::format("blk.{}.", i);
  return {p + "attn_norm.weight", p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight",
          p + "attn_output.weight", p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias",
          p + "attn_q_norm.weight", p + "attn_k_norm.weight", p + "ffn_norm.weight", p + "ffn_gate.weight",
          p + "ffn_up.weight", p + "ffn_down.weight"};
}

struct GlobalNames {
  std::string embedding, output_norm, output;
};

LlamaWeights read_weights(const WeightReader& r, const ModelConfig& c, const GlobalNames& global,
                          LayerNames (*layer_names)(int)) {
  LlamaWeights w;
  w.token_embedding = r.matrix(global.embedding, c.vocab_size, c.hidden_size);
  w.output_norm = r.vector(global.output_norm, c.hidden_size);
  w.output = c.tie_word_embeddings ? w.token_embedding : r.matrix(global.output, c.vocab_size, c.hidden_size);
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerNames n = layer_names(i);
    LayerWeights l;
    l.attn_norm = r.vector(n.attn_norm, c.hidden_size);
    l.wq = r.matrix(n.q, c.q_dim(), c.hidden_size);
    l.wk = r.matrix(n.k, c.kv_dim(), c.hidden_size);
    l.wv = r.matrix(n.v, c.kv_dim(), c.hidden_size);
    l.wo = r.matrix(n.o, c.hidden_size, c.q_dim());
    if (c.qkv_bias) {
      l.bq = r.vector(n.q_bias, c.q_dim());
      l.bk = r.vector(n.k_bias, c.kv_dim());
      l.bv = r.vector(n.v_bias, c.kv_dim());
    }
    if (c.qk_norm) {
      l.q_norm = r.vector(n.q_norm, c.head_dim);
      l.k_norm = r.vector(n.k_norm, c.head_dim);
    }
    l.ffn_norm = r.vector(n.ffn_norm, c.hidden_size);
    l.w_gate = r.matrix(n.gate, c.intermediate_size, c.hidden_size);
    l.w_up = r.matrix(n.up, c.intermediate_size, c.hidden_size);
    l.w_down = r.matrix(n.down, c.hidden_size, c.intermediate_size);
    w.layers.push_back(std::move(l));
  }
  return w;
}

json read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

GenerationDefaults read_generation_config(const fs::path& path, std::vector<std::int32_t>& eos_ids) {
  GenerationDefaults g;
  if (!fs::exists(path)) return g;
  const json j = read_json_file(path);
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
  if (auto k = number("top_k")) g.top_k = static_cast<int>(*k);
  if (auto it = j.find("do_sample"); it != j.end() && it->is_boolean()) g.do_sample = it->get<bool>();
  // generation_config.json's eos ids (often a list with end-of-turn tokens) take precedence.
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    eos_ids.clear();
    for (const auto& id : it->is_array() ? *it : json::array({*it})) {
      if (!id.is_number_integer()) fail("{}: \"eos_token_id\" must hold token ids", path.string());
      eos_ids.push_back(id.get<std::int32_t>());
    }
  }
  return g;
}

std::optional<StoredTensor> from_safetensors(const SafetensorsTensor* t) {
  if (!t) return std::nullopt;
  return StoredTensor{t->dtype, t->shape, t->data};
}

std::optional<StoredTensor> from_gguf(const GgufTensorInfo* t) {
  if (!t) return std::nullopt;
  return StoredTensor{t->dtype, {t->dims.rbegin(), t->dims.rend()}, t->data};
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
    ckpt.config_ = config_from_hf(read_json_file(config_path), config_path.string());
    ckpt.generation_ = read_generation_config(folder / "generation_config.json", ckpt.config_.eos_token_ids);
    ckpt.tokenizer_json_ = (folder / "tokenizer.json").string();
    ckpt.safetensors_ = std::make_unique<SafetensorsSet>(path);
    const SafetensorsSet* set = ckpt.safetensors_.get();
    WeightReader reader([set](const std::string& name) { return from_safetensors(set->find(name)); }, path);
    ckpt.weights_ = read_weights(reader, ckpt.config_, {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"},
                                 hf_layer_names);
  } else if (fs::exists(path)) {
    ckpt.format_ = CheckpointFormat::Gguf;
    ckpt.gguf_ = std::make_unique<GgufFile>(path);
    const GgufFile* gguf = ckpt.gguf_.get();
    ckpt.config_ = config_from_gguf(*gguf);
    WeightReader reader([gguf](const std::string& name) { return from_gguf(gguf->find_tensor(name)); }, path);
    ckpt.weights_ = read_weights(reader, ckpt.config_, {"token_embd.weight", "output_norm.weight", "output.weight"},
                                 gguf_layer_names);
    // llama.cpp stores llama3 rope scaling as per-frequency factors instead of metadata.
    ckpt.weights_.rope_freq_factors = reader.optional_vector("rope_freqs.weight", ckpt.config_.head_dim / 2);
  } else {
    fail("{}: no such file or folder", path);
  }
  return ckpt;
}

namespace {
template <typename Fn>
void for_each_matrix(const LlamaWeights& w, bool tied, Fn fn) {
  fn(w.token_embedding);
  if (!tied) fn(w.output);
  for (const auto& l : w.layers) {
    for (const auto* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) fn(*m);
  }
}
}  // namespace

Checkpoint Checkpoint::from_memory(std::string name, ModelConfig config, LlamaWeights weights,
                                   std::vector<std::vector<std::uint8_t>> storage) {
  Checkpoint ckpt;
  ckpt.path_ = std::move(name);
  ckpt.format_ = CheckpointFormat::Memory;
  ckpt.config_ = std::move(config);
  ckpt.weights_ = std::move(weights);
  ckpt.storage_ = std::move(storage);
  return ckpt;
}

std::size_t Checkpoint::parameter_count() const {
  std::size_t n = weights_.output_norm.size();
  for_each_matrix(weights_, config_.tie_word_embeddings, [&](const WeightMatrix& m) { n += m.rows * m.cols; });
  for (const auto& l : weights_.layers) {
    n += l.attn_norm.size() + l.ffn_norm.size();
    for (const auto* v : {&l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm}) n += *v ? (*v)->size() : 0;
  }
  return n;
}

std::size_t Checkpoint::weight_bytes() const {
  std::size_t bytes = 0;
  for_each_matrix(weights_, config_.tie_word_embeddings,
                  [&](const WeightMatrix& m) { bytes += m.bytes(); });
  return bytes;
}

std::string Checkpoint::dtype_summary() const {
  std::map<std::string_view, std::size_t> bytes_by_type;
  std::size_t total = 0;
  for_each_matrix(weights_, config_.tie_word_embeddings, [&](const WeightMatrix& m) {
    const std::size_t b = m.bytes();
    bytes_by_type[dtype_name(m.dtype)] += b;
    total += b;
  });
  std::vector<std::string> parts;
  for (const auto& [name, b] : bytes_by_type) parts.push_back(fmt::format("{} {:.0f}%", name, 100.0 * b / total));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace rf
