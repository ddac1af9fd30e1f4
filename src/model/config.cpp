#include "model/config.h"

#include <cmath>
#include <numbers>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "util/error.h"

namespace rf {

namespace {

using nlohmann::json;

const json* find_key(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int json_int(const json& j, const char* key, const std::string& source, std::optional<int> fallback = {}) {
  const json* v = find_key(j, key);
  if (!v) {
    if (fallback) return *fallback;
    fail("{}: missing \"{}\"", source, key);
  }
  if (!v->is_number_integer() || v->get<std::int64_t>() < 0 || v->get<std::int64_t>() > (1 << 30)) {
    fail("{}: \"{}\" must be a non-negative integer, got {}", source, key, v->dump());
  }
  return v->get<int>();
}

double json_number(const json& j, const char* key, const std::string& source, double fallback) {
  const json* v = find_key(j, key);
  if (!v) return fallback;
  if (!v->is_number()) fail("{}: \"{}\" must be a number, got {}", source, key, v->dump());
  return v->get<double>();
}

bool json_bool(const json& j, const char* key, const std::string& source, bool fallback) {
  const json* v = find_key(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail("{}: \"{}\" must be true or false, got {}", source, key, v->dump());
  return v->get<bool>();
}

// eos_token_id is an int or a list of ints.
std::vector<std::int32_t> json_token_ids(const json& j, const char* key, const std::string& source) {
  const json* v = find_key(j, key);
  std::vector<std::int32_t> ids;
  if (!v) return ids;
  auto add = [&](const json& item) {
    if (!item.is_number_integer()) fail("{}: \"{}\" must hold token ids, got {}", source, key, v->dump());
    ids.push_back(item.get<std::int32_t>());
  };
  if (v->is_array()) {
    for (const auto& item : *v) add(item);
  } else {
    add(*v);
  }
  return ids;
}

Arch arch_from_hf(const json& config, const std::string& source) {
  std::string type;
  if (const json* t = find_key(config, "model_type"); t && t->is_string()) type = t->get<std::string>();
  if (type.empty()) {
    if (const json* a = find_key(config, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string()) {
      const auto name = (*a)[0].get<std::string>();
      if (name == "LlamaForCausalLM") type = "llama";
      if (name == "MistralForCausalLM") type = "mistral";
      if (name == "Qwen2ForCausalLM") type = "qwen2";
      if (name == "Qwen3ForCausalLM") type = "qwen3";
    }
  }
  if (type == "llama") return Arch::Llama;
  if (type == "mistral") return Arch::Mistral;
  if (type == "qwen2") return Arch::Qwen2;
  if (type == "qwen3") return Arch::Qwen3;
  fail("{}: model_type \"{}\" is not supported (supported: llama, mistral, qwen2, qwen3)", source, type);
}

// transformers < 5 writes rope_theta and rope_scaling at the top level; transformers 5 nests
// both in rope_parameters.
void read_hf_rope(const json& config, const std::string& source, ModelConfig& c) {
  const json* params = find_key(config, "rope_parameters");
  const json* scaling = params ? params : find_key(config, "rope_scaling");
  c.rope_theta = json_number(params ? *params : config, "rope_theta", source, 10000.0);
  if (!scaling) return;
  if (!scaling->is_object()) fail("{}: rope scaling must be an object, got {}", source, scaling->dump());
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (const json* t = find_key(*scaling, key); t && t->is_string()) {
      type = t->get<std::string>();
      break;
    }
  }
  auto& s = c.rope_scaling;
  if (type == "default") return;
  s.factor = json_number(*scaling, "factor", source, 1.0);
  if (type == "linear") {
    s.kind = RopeScaling::Kind::Linear;
  } else if (type == "llama3") {
    s.kind = RopeScaling::Kind::Llama3;
    s.low_freq_factor = json_number(*scaling, "low_freq_factor", source, 1.0);
    s.high_freq_factor = json_number(*scaling, "high_freq_factor", source, 4.0);
    s.original_max_position = json_number(*scaling, "original_max_position_embeddings", source, 8192.0);
  } else {
    fail("{}: rope scaling type \"{}\" is not supported (supported: default, linear, llama3)", source, type);
  }
}

}  // namespace

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
  }
  return "?";
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int v, const char* name) {
    if (v <= 0) fail("{}: {} must be positive, got {}", source, name, v);
  };
  positive(vocab_size, "vocab size");
  positive(hidden_size, "hidden size");
  positive(intermediate_size, "intermediate size");
  positive(n_layers, "layer count");
  positive(n_heads, "attention head count");
  positive(n_kv_heads, "key/value head count");
  positive(head_dim, "head dimension");
  positive(max_position_embeddings, "context length");
  if (n_heads % n_kv_heads != 0) {
    fail("{}: {} attention heads do not divide into {} key/value heads", source, n_heads, n_kv_heads);
  }
  if (head_dim % 2 != 0) fail("{}: head dimension {} must be even for RoPE", source, head_dim);
  if (!(rms_norm_eps > 0) || !(rope_theta > 0)) fail("{}: rms_norm_eps and rope_theta must be positive", source);
  if (!(rope_scaling.factor > 0)) fail("{}: rope scaling factor must be positive", source);
}

ModelConfig config_from_hf(const json& config, const std::string& source) {
  if (!config.is_object()) fail("{}: expected a JSON object", source);
  ModelConfig c;
  c.arch = arch_from_hf(config, source);
  if (const json* act = find_key(config, "hidden_act"); act && *act != "silu") {
    fail("{}: hidden_act {} is not supported (only silu)", source, act->dump());
  }
  if (json_bool(config, "mlp_bias", source, false)) fail("{}: mlp_bias is not supported", source);
  c.vocab_size = json_int(config, "vocab_size", source);
  c.hidden_size = json_int(config, "hidden_size", source);
  c.intermediate_size = json_int(config, "intermediate_size", source);
  c.n_layers = json_int(config, "num_hidden_layers", source);
  c.n_heads = json_int(config, "num_attention_heads", source);
  c.n_kv_heads = json_int(config, "num_key_value_heads", source, c.n_heads);
  c.head_dim = json_int(config, "head_dim", source, c.n_heads > 0 ? c.hidden_size / c.n_heads : 0);
  c.max_position_embeddings = json_int(config, "max_position_embeddings", source, 2048);
  c.rms_norm_eps = json_number(config, "rms_norm_eps", source, 1e-6);
  c.tie_word_embeddings = json_bool(config, "tie_word_embeddings", source, false);
  c.qkv_bias = c.arch == Arch::Qwen2 || json_bool(config, "attention_bias", source, false);
  c.qk_norm = c.arch == Arch::Qwen3;
  c.eos_token_ids = json_token_ids(config, "eos_token_id", source);
  // Qwen2 configs carry a sliding_window that only applies with use_sliding_window.
  if (find_key(config, "sliding_window") && json_bool(config, "use_sliding_window", source, c.arch == Arch::Mistral)) {
    c.sliding_window = json_int(config, "sliding_window", source);
  }
  read_hf_rope(config, source, c);
  c.validate(source);
  return c;
}

ModelConfig config_from_gguf(const GgufFile& gguf) {
  const std::string arch = gguf.get_string("general.architecture");
  ModelConfig c;
  if (arch == "llama") {
    c.arch = Arch::Llama;
    // llama.cpp's converter permutes the q/k rows of this architecture for its RoPE mode.
    c.rope_layout = RopeLayout::Interleaved;
  } else if (arch == "qwen2") {
    c.arch = Arch::Qwen2;
    c.qkv_bias = true;
  } else if (arch == "qwen3") {
    c.arch = Arch::Qwen3;
    c.qk_norm = true;
  } else {
    fail("{}: architecture \"{}\" is not supported (supported: llama, qwen2, qwen3)", gguf.path(), arch);
  }
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  auto get_int = [&](const char* suffix) {
    const auto v = gguf.get_uint(key(suffix));
    if (v > (1u << 30)) fail("{}: {} = {} is out of range", gguf.path(), key(suffix), v);
    return static_cast<int>(v);
  };
  c.hidden_size = get_int("embedding_length");
  c.intermediate_size = get_int("feed_forward_length");
  c.n_layers = get_int("block_count");
  c.n_heads = get_int("attention.head_count");
  c.n_kv_heads = gguf.find(key("attention.head_count_kv")) ? get_int("attention.head_count_kv") : c.n_heads;
  c.head_dim = gguf.find(key("attention.key_length")) ? get_int("attention.key_length")
                                                       : (c.n_heads > 0 ? c.hidden_size / c.n_heads : 0);
  c.max_position_embeddings = get_int("context_length");
  c.rms_norm_eps = gguf.get_float_opt(key("attention.layer_norm_rms_epsilon")).value_or(1e-5);
  c.rope_theta = gguf.get_float_opt(key("rope.freq_base")).value_or(10000.0);
  if (auto type = gguf.get_string_opt(key("rope.scaling.type")); type && *type == "linear") {
    c.rope_scaling.kind = RopeScaling::Kind::Linear;
    c.rope_scaling.factor = gguf.get_float_opt(key("rope.scaling.factor")).value_or(1.0);
  }
  if (auto n = gguf.get_uint_opt(key("vocab_size"))) {
    c.vocab_size = static_cast<int>(std::min<std::uint64_t>(*n, 1u << 30));
  } else {
    c.vocab_size = static_cast<int>(gguf.tensor("token_embd.weight").dims.at(1));
  }
  c.tie_word_embeddings = gguf.find_tensor("output.weight") == nullptr;
  if (auto eos = gguf.get_uint_opt("tokenizer.ggml.eos_token_id")) c.eos_token_ids.push_back(static_cast<int>(*eos));
  c.validate(gguf.path());
  return c;
}

std::vector<float> rope_inv_freq(const ModelConfig& config, const std::vector<float>* freq_factors) {
  const int half = config.head_dim / 2;
  std::vector<float> inv_freq(half);
  const auto& s = config.rope_scaling;
  for (int i = 0; i < half; ++i) {
    // Hugging Face rounds the base frequencies to fp32 before scaling them; so do we.
    double freq = static_cast<float>(1.0 / std::pow(config.rope_theta, 2.0 * i / config.head_dim));
    if (freq_factors) {
      freq /= (*freq_factors)[i];
    } else if (s.kind == RopeScaling::Kind::Linear) {
      freq /= s.factor;
    } else if (s.kind == RopeScaling::Kind::Llama3) {
      // Long wavelengths are slowed by `factor`, short ones kept, the band between blended.
      const double wavelen = 2 * std::numbers::pi / freq;
      const double low_freq_wavelen = s.original_max_position / s.low_freq_factor;
      const double high_freq_wavelen = s.original_max_position / s.high_freq_factor;
      if (wavelen > low_freq_wavelen) {
        freq /= s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        freq = (1 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    inv_freq[i] = static_cast<float>(freq);
  }
  return inv_freq;
}

}  // namespace rf
