#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/tensor.h"
#include "util/error.h"
#include "util/half.h"
#include "util/numeric_fit.h"

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

// A number whose absence means transformers' default and whose null turns the feature off (0).
double json_number_or_off(const json& j, const char* key, const std::string& source, double if_absent) {
  const auto it = j.find(key);
  if (it == j.end()) return if_absent;
  return it->is_null() ? 0.0 : json_number(j, key, source, if_absent);
}

// transformers' Gemma3TextConfig defaults, which the text_config of the multimodal checkpoints
// leans on (gemma-3-4b-it's names only its hidden and ffn sizes, layers, window and rope scaling).
const json& gemma3_text_defaults() {
  static const json defaults = json::parse(R"({
    "model_type": "gemma3_text", "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": true})");
  return defaults;
}

// A multimodal Gemma 3 checkpoint (Gemma3ForConditionalGeneration): its language model's config,
// text_config over transformers' defaults, with the dtype and eos ids of the whole.
json gemma3_text_part(const json& config, const std::string& source) {
  const auto text = config.find("text_config");
  if (text == config.end() || !text->is_object()) {
    fail("{}: a multimodal Gemma 3 config needs a text_config object", source);
  }
  json merged = gemma3_text_defaults();
  merged.update(*text);
  merged["model_type"] = "gemma3_text";
  merged.erase("architectures");
  for (const char* key : {"torch_dtype", "dtype", "eos_token_id"}) {
    if (!merged.contains(key) && config.contains(key)) merged[key] = config[key];
  }
  return merged;
}

bool json_bool(const json& j, const char* key, const std::string& source, bool fallback) {
  const json* v = find_key(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail("{}: \"{}\" must be true or false, got {}", source, key, v->dump());
  return v->get<bool>();
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
      if (name == "Gemma2ForCausalLM") type = "gemma2";
      if (name == "Gemma3ForCausalLM") type = "gemma3_text";
      if (name == "Phi3ForCausalLM") type = "phi3";
      if (name == "MixtralForCausalLM") type = "mixtral";
      if (name == "Qwen3MoeForCausalLM") type = "qwen3_moe";
    }
  }
  if (type == "llama") return Arch::Llama;
  if (type == "mistral") return Arch::Mistral;
  if (type == "qwen2") return Arch::Qwen2;
  if (type == "qwen3") return Arch::Qwen3;
  if (type == "gemma2") return Arch::Gemma2;
  if (type == "gemma3_text") return Arch::Gemma3;
  if (type == "phi3") return Arch::Phi3;
  if (type == "mixtral") return Arch::Mixtral;
  if (type == "qwen3_moe") return Arch::Qwen3Moe;
  fail("{}: model_type \"{}\" is not supported (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, "
       "mixtral, qwen3_moe)",
       source, type);
}

// Gemma's configs name the MLP's activation hidden_activation (their hidden_act is ignored).
MlpActivation read_hf_activation(const json& config, const std::string& source, Arch arch) {
  const json* act = find_key(config, is_gemma(arch) ? "hidden_activation" : "hidden_act");
  if (!act) return is_gemma(arch) ? MlpActivation::GeluTanh : MlpActivation::Silu;  // transformers' defaults
  if (*act == "silu") return MlpActivation::Silu;
  if (*act == "gelu_pytorch_tanh") return MlpActivation::GeluTanh;
  fail("{}: hidden activation {} is not supported (supported: silu, gelu_pytorch_tanh)", source, act->dump());
}

std::vector<float> json_floats(const json& j, const char* key, const std::string& source) {
  const json* v = find_key(j, key);
  if (!v || !v->is_array()) fail("{}: rope scaling needs a list \"{}\"", source, key);
  std::vector<float> values;
  for (const json& item : *v) {
    if (!item.is_number() || !fits_in<float>(item.get<double>())) {
      fail("{}: \"{}\" must hold numbers within a 32-bit float's range, got {}", source, key, item.dump());
    }
    values.push_back(item.get<float>());
  }
  return values;
}

// LongRoPE as transformers computes it (_compute_longrope_parameters): original_max_position_embeddings
// from the scaling or the config's top level, the factor max_position_embeddings / that unless the
// scaling names one, and the attention factor sqrt(1 + ln(factor) / ln(original)) unless it names one.
void read_longrope(const json& config, const json& scaling, const std::string& source, ModelConfig& c) {
  auto& s = c.rope_scaling;
  s.kind = RopeScaling::Kind::LongRope;
  s.short_factor = json_floats(scaling, "short_factor", source);
  s.long_factor = json_floats(scaling, "long_factor", source);
  const json& holder = find_key(scaling, "original_max_position_embeddings") ? scaling : config;
  s.original_max_position = json_int(holder, "original_max_position_embeddings", source, c.max_position_embeddings);
  if (s.original_max_position <= 0) fail("{}: original_max_position_embeddings must be positive", source);
  s.factor = json_number(scaling, "factor", source, c.max_position_embeddings / s.original_max_position);
  const double fallback = s.factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(s.factor) / std::log(s.original_max_position));
  s.attention_factor = json_number(scaling, "attention_factor", source, fallback);
}

// rope_theta from `theta_in`, the scaling rule from `scaling` (none when null); `config` is the
// whole config.json, for what LongRoPE reads from its top level.
void read_rope(const json& theta_in, const json* scaling, const std::string& source, ModelConfig& c,
               const json& config) {
  c.rope_theta = json_number(theta_in, "rope_theta", source, 10000.0);
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
  } else if (type == "longrope" || type == "su") {
    read_longrope(config, *scaling, source, c);
  } else if (type == "llama3") {
    s.kind = RopeScaling::Kind::Llama3;
    s.low_freq_factor = json_number(*scaling, "low_freq_factor", source, 1.0);
    s.high_freq_factor = json_number(*scaling, "high_freq_factor", source, 4.0);
    s.original_max_position = json_number(*scaling, "original_max_position_embeddings", source, 8192.0);
  } else {
    fail("{}: rope scaling type \"{}\" is not supported (supported: default, linear, llama3, longrope)", source, type);
  }
}

// transformers < 5 writes rope_theta and rope_scaling at the top level (Gemma 3 also
// rope_local_base_freq); transformers 5 nests them in rope_parameters, keyed by layer type where
// the sliding-window layers have their own (Gemma 3).
void read_hf_rope(const json& config, const std::string& source, ModelConfig& c) {
  const json* params = find_key(config, "rope_parameters");
  if (params && params->contains("full_attention")) {
    const json& global = params->at("full_attention");
    read_rope(global, &global, source, c, config);
    if (const json* local = find_key(*params, "sliding_attention")) {
      ModelConfig l;
      read_rope(*local, local, source, l, config);
      if (l.rope_scaling.kind != RopeScaling::Kind::None) {
        fail("{}: scaled RoPE on the sliding-window layers is not supported", source);
      }
      c.rope_local_theta = l.rope_theta;
    }
    return;
  }
  read_rope(params ? *params : config, params ? params : find_key(config, "rope_scaling"), source, c, config);
  // Phi-4-mini: RoPE on the first partial_rotary_factor of each head (top level, or in rope_parameters).
  const double partial = json_number(params && params->contains("partial_rotary_factor") ? *params : config,
                                     "partial_rotary_factor", source, 1.0);
  if (!(partial > 0 && partial <= 1)) fail("{}: partial_rotary_factor must be in (0, 1], got {}", source, partial);
  // transformers: int(head_dim * partial_rotary_factor)
  if (partial < 1) c.rotary_dim = static_cast<int>(c.head_dim * partial);
  if (c.arch == Arch::Gemma3) c.rope_local_theta = json_number(config, "rope_local_base_freq", source, 10000.0);
}

// Which layers slide, as transformers decides: from layer_types where the config has it, else by
// each architecture's rule (Mistral: every layer; Qwen2: those from max_window_layers on, with
// use_sliding_window; Gemma 2: the even layers; Gemma 3: all but every sliding_window_pattern-th).
std::vector<int> read_hf_windows(const json& config, const std::string& source, const ModelConfig& c) {
  const bool qwen = c.arch == Arch::Qwen2 || c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe;
  if (!find_key(config, "sliding_window") || (qwen && !json_bool(config, "use_sliding_window", source, false))) {
    return {};
  }
  const int window = json_int(config, "sliding_window", source);
  std::vector<bool> sliding(c.n_layers, true);
  if (const json* types = find_key(config, "layer_types")) {
    if (!types->is_array() || types->size() != static_cast<std::size_t>(c.n_layers)) {
      fail("{}: layer_types must list the {} layers' attention types, got {}", source, c.n_layers, types->dump());
    }
    for (int i = 0; i < c.n_layers; ++i) {
      const json& t = (*types)[i];
      if (t != "sliding_attention" && t != "full_attention") {
        fail("{}: layer_types[{}] is {}: supported are \"sliding_attention\" and \"full_attention\"", source, i, t.dump());
      }
      sliding[i] = t == "sliding_attention";
    }
  } else if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) {
    const int pattern = c.arch == Arch::Gemma2 ? 2 : json_int(config, "sliding_window_pattern", source, 6);
    if (pattern <= 0) fail("{}: sliding_window_pattern must be positive, got {}", source, pattern);
    for (int i = 0; i < c.n_layers; ++i) sliding[i] = (i + 1) % pattern != 0;
  } else if (qwen) {
    const int first = json_int(config, "max_window_layers", source, 28);
    for (int i = 0; i < c.n_layers; ++i) sliding[i] = i >= first;
  }
  std::vector<int> windows(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) windows[i] = sliding[i] ? window : 0;
  if (std::ranges::all_of(windows, [](int w) { return w == 0; })) windows.clear();
  return windows;
}

// transformers multiplies Gemma's embeddings by sqrt(hidden_size) cast to the model's dtype (Gemma
// 2's normalizer, Gemma 3's embed_scale): the checkpoint's, which it runs in by default.
float embedding_scale_in_dtype(int hidden_size, const json& config, const std::string& source) {
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(hidden_size)));
  const json* dtype = find_key(config, "torch_dtype");
  if (!dtype) dtype = find_key(config, "dtype");
  if (!dtype || *dtype == "float32") return scale;
  if (*dtype == "bfloat16") return bf16_to_f32(f32_to_bf16(scale));
  if (*dtype == "float16") return f16_to_f32(f32_to_f16(scale));
  fail("{}: dtype {} is not supported (supported: float32, bfloat16, float16)", source, dtype->dump());
}

// Gemma's additions to the decoder, with transformers' defaults where a key is absent.
void read_hf_gemma(const json& config, const std::string& source, ModelConfig& c) {
  const bool gemma2 = c.arch == Arch::Gemma2;
  c.embedding_scale = embedding_scale_in_dtype(c.hidden_size, config, source);
  c.post_norms = true;
  c.query_pre_attn_scalar = json_number(config, "query_pre_attn_scalar", source, 256.0);
  c.attn_logit_softcap = json_number_or_off(config, "attn_logit_softcapping", source, gemma2 ? 50.0 : 0.0);
  c.final_logit_softcap = json_number_or_off(config, "final_logit_softcapping", source, gemma2 ? 30.0 : 0.0);
}

// What llama.cpp's Gemma 2 / Gemma 3 graphs read from the metadata, and what they assume
// (llama-model.cpp): the embeddings scale by sqrtf(n_embd); the attention by head_dim^-1/2, or
// (hidden/heads)^-1/2 for the 27B models (46 and 62 layers), as their configs'
// query_pre_attn_scalar; Gemma 2's even layers slide (window 4096 when the file names none), and
// five in six of Gemma 3's where the file names a window, with RoPE base 10000 unless
// rope.freq_base_swa says otherwise; soft-capping defaults to 50 (attention) and 30 (logits) on
// Gemma 2 and is off on Gemma 3, but for the final_logit_softcapping a file may carry.
void read_gguf_gemma(const GgufFile& gguf, const std::string& arch, ModelConfig& c) {
  const bool gemma2 = c.arch == Arch::Gemma2;
  c.activation = MlpActivation::GeluTanh;
  c.post_norms = true;
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  const bool is_27b = c.n_layers == (gemma2 ? 46 : 62);
  c.query_pre_attn_scalar = is_27b ? static_cast<double>(c.hidden_size / c.n_heads) : c.head_dim;
  c.attn_logit_softcap = gemma2 ? gguf.get_float_opt(arch + ".attn_logit_softcapping").value_or(50.0) : 0.0;
  c.final_logit_softcap = gguf.get_float_opt(arch + ".final_logit_softcapping").value_or(gemma2 ? 30.0 : 0.0);
  auto window = gguf.get_uint_opt(arch + ".attention.sliding_window");
  if (gemma2 && !window) window = 4096;  // llama.cpp's default for gemma2
  if (!window || *window == 0) return;
  if (*window > (1u << 30)) fail("{}: {}.attention.sliding_window = {} is out of range", gguf.path(), arch, *window);
  set_gemma_windows(c, static_cast<int>(*window));
  if (!gemma2) c.rope_local_theta = gguf.get_float_opt(arch + ".rope.freq_base_swa").value_or(10000.0);
}

// Phi-3's keys and tensors as llama.cpp reads them (llama-model.cpp, LLM_ARCH_PHI3): RoPE over
// rope.dimension_count dimensions; LongRoPE's factors as the tensors rope_factors_long and
// rope_factors_short, with rope.scaling.original_context_length and rope.scaling.attn_factor (1 where
// absent); the window attention.sliding_window on every layer (0: none), or where a file lacks the
// key, llama.cpp's defaults for the first Phi-3 files (mini/medium 4k: 2047).
void read_gguf_phi3(const GgufFile& gguf, const std::string& arch, ModelConfig& c) {
  if (auto dims = gguf.get_uint_opt(arch + ".rope.dimension_count"); dims && *dims < static_cast<std::uint64_t>(c.head_dim)) {
    c.rotary_dim = static_cast<int>(*dims);
  }
  const GgufTensorInfo* long_factors = gguf.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* short_factors = gguf.find_tensor("rope_factors_short.weight");
  if (long_factors && short_factors) {
    auto read = [&](const GgufTensorInfo& t) {
      if (t.dims.size() != 1) fail("{}: tensor {} must be 1-D, has {} dimensions", gguf.path(), t.name, t.dims.size());
      return to_f32(gguf.path(), make_tensor_view(gguf.path(), t.name, t.dtype, t.dims, t.size_bytes, t.data));
    };
    auto& s = c.rope_scaling;
    s.kind = RopeScaling::Kind::LongRope;
    s.long_factor = read(*long_factors);
    s.short_factor = read(*short_factors);
    s.original_max_position = static_cast<double>(
        gguf.get_uint_opt(arch + ".rope.scaling.original_context_length").value_or(c.max_position_embeddings));
    s.attention_factor = gguf.get_float_opt(arch + ".rope.scaling.attn_factor").value_or(1.0);
  }
  std::optional<std::uint64_t> window = gguf.get_uint_opt(arch + ".attention.sliding_window");
  if (!window && (c.n_layers == 32 || c.n_layers == 40) && c.max_position_embeddings == 4096) window = 2047;
  if (!window || *window == 0) return;
  if (*window > (1u << 30)) fail("{}: {}.attention.sliding_window = {} is out of range", gguf.path(), arch, *window);
  c.layer_windows.assign(c.n_layers, static_cast<int>(*window));
}

// Mixtral's and Qwen3-MoE's experts, as transformers reads them (its config classes' defaults where a
// key is absent): Mixtral's every layer is sparse, its experts intermediate_size wide, their weights
// renormalised; Qwen3-MoE's layer i is sparse unless listed in mlp_only_layers or (i + 1) is not a
// multiple of decoder_sparse_step, with experts moe_intermediate_size wide, renormalised only with
// norm_topk_prob (false by default, true in the released models). num_experts 0 leaves it dense.
void read_hf_moe(const json& config, const std::string& source, ModelConfig& c) {
  const bool mixtral = c.arch == Arch::Mixtral;
  c.n_experts = json_int(config, mixtral ? "num_local_experts" : "num_experts", source, mixtral ? 8 : 128);
  c.n_experts_used = json_int(config, "num_experts_per_tok", source, mixtral ? 2 : 8);
  c.expert_ffn = mixtral ? c.intermediate_size : json_int(config, "moe_intermediate_size", source, 768);
  c.norm_topk_prob = mixtral || json_bool(config, "norm_topk_prob", source, false);
  if (c.n_experts == 0) return;
  c.moe_layers.assign(c.n_layers, true);
  if (mixtral) return;
  const int step = json_int(config, "decoder_sparse_step", source, 1);
  if (step <= 0) fail("{}: decoder_sparse_step must be positive, got {}", source, step);
  for (int i = 0; i < c.n_layers; ++i) c.moe_layers[i] = (i + 1) % step == 0;
  if (const json* dense = find_key(config, "mlp_only_layers")) {
    if (!dense->is_array()) fail("{}: mlp_only_layers must be a list of layer indices, got {}", source, dense->dump());
    for (const json& i : *dense) {
      if (!i.is_number_integer() || i.get<std::int64_t>() < 0 || i.get<std::int64_t>() >= c.n_layers) {
        fail("{}: mlp_only_layers holds {}, not a layer index below {}", source, i.dump(), c.n_layers);
      }
      c.moe_layers[i.get<int>()] = false;
    }
  }
}

// llama.cpp's MoE metadata: {arch}.expert_count and expert_used_count; the experts are
// feed_forward_length wide in `llama` files (Mixtral), expert_feed_forward_length in qwen3moe ones.
// Which layers are sparse is not stored: a layer with a router (blk.N.ffn_gate_inp) is. llama.cpp
// renormalises the chosen experts' weights of both (its build_moe_ffn with norm_w).
void read_gguf_moe(const GgufFile& gguf, const std::string& arch, ModelConfig& c) {
  const auto count = gguf.get_uint_opt(arch + ".expert_count").value_or(0);
  if (count == 0) return;
  const auto used = gguf.get_uint_opt(arch + ".expert_used_count").value_or(0);
  const auto ffn = gguf.get_uint_opt(arch + ".expert_feed_forward_length").value_or(c.intermediate_size);
  if (count > 4096 || used > count || ffn > (1u << 30)) {
    fail("{}: expert count {}, used {}, width {} are out of range", gguf.path(), count, used, ffn);
  }
  c.n_experts = static_cast<int>(count);
  c.n_experts_used = static_cast<int>(used);
  c.expert_ffn = static_cast<int>(ffn);
  c.norm_topk_prob = true;
  c.moe_layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    c.moe_layers[i] = gguf.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", i)) != nullptr;
  }
}

}  // namespace

std::vector<std::int32_t> json_token_ids(const json& j, const char* key, const std::string& source) {
  const json* v = find_key(j, key);  // absent or null: none
  std::vector<std::int32_t> ids;
  if (!v) return ids;
  auto add = [&](const json& item) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 0 || item.get<std::int64_t>() > INT32_MAX) {
      fail("{}: \"{}\" must hold token ids, got {}", source, key, item.dump());
    }
    ids.push_back(item.get<std::int32_t>());
  };
  if (v->is_array()) {
    for (const auto& item : *v) add(item);
  } else {
    add(*v);
  }
  return ids;
}

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Gemma2: return "gemma2";
    case Arch::Gemma3: return "gemma3";
    case Arch::Phi3: return "phi3";
    case Arch::Mixtral: return "mixtral";
    case Arch::Qwen3Moe: return "qwen3_moe";
  }
  return "?";
}

bool is_gemma(Arch arch) { return arch == Arch::Gemma2 || arch == Arch::Gemma3; }

void set_gemma_windows(ModelConfig& c, int window) {
  const int pattern = c.arch == Arch::Gemma2 ? 2 : 6;
  c.layer_windows.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) c.layer_windows[i] = i % pattern < pattern - 1 ? window : 0;
}

int ModelConfig::smallest_window() const {
  int smallest = 0;
  for (int w : layer_windows) {
    if (w > 0 && (smallest == 0 || w < smallest)) smallest = w;
  }
  return smallest;
}

double ModelConfig::attention_scale() const { return 1.0 / std::sqrt(query_pre_attn_scalar.value_or(head_dim)); }

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
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    fail("{}: RoPE's {} rotated dimensions must be even and at most the head dimension {}", source, rotary_dim, head_dim);
  }
  if (rope_scaling.kind == RopeScaling::Kind::LongRope) {
    const std::size_t pairs = rope_dims() / 2;
    if (rope_scaling.short_factor.size() != pairs || rope_scaling.long_factor.size() != pairs) {
      fail("{}: LongRoPE's short and long factors must have {} entries (one per rotated pair), got {} and {}", source,
           pairs, rope_scaling.short_factor.size(), rope_scaling.long_factor.size());
    }
    const auto bad = [](float f) { return !(f > 0) || !std::isfinite(f); };
    if (std::ranges::any_of(rope_scaling.short_factor, bad) || std::ranges::any_of(rope_scaling.long_factor, bad)) {
      fail("{}: LongRoPE's factors must be positive", source);
    }
    if (!(rope_scaling.attention_factor > 0)) fail("{}: LongRoPE's attention factor must be positive", source);
  }
  if (rope_local_theta && !(*rope_local_theta > 0)) fail("{}: the local RoPE base must be positive", source);
  if (!layer_windows.empty() && layer_windows.size() != static_cast<std::size_t>(n_layers)) {
    fail("{}: {} sliding windows for {} layers", source, layer_windows.size(), n_layers);
  }
  if (std::ranges::any_of(layer_windows, [](int w) { return w < 0; })) fail("{}: a sliding window is negative", source);
  if (query_pre_attn_scalar && !(*query_pre_attn_scalar > 0)) fail("{}: query_pre_attn_scalar must be positive", source);
  if (!(attn_logit_softcap >= 0) || !(final_logit_softcap >= 0)) fail("{}: soft-capping must not be negative", source);
  if (!(embedding_scale > 0) || !std::isfinite(embedding_scale)) fail("{}: the embedding scale must be positive", source);
  if (n_experts > 0) {
    if (n_experts_used <= 0 || n_experts_used > n_experts) {
      fail("{}: {} experts used per token of {} experts", source, n_experts_used, n_experts);
    }
    positive(expert_ffn, "expert feed-forward width");
    if (moe_layers.size() != static_cast<std::size_t>(n_layers)) fail("{}: the sparse layers are not listed", source);
  } else if (!moe_layers.empty()) {
    fail("{}: sparse layers without experts", source);
  }
}

ModelConfig config_from_hf(const json& config, const std::string& source) {
  if (!config.is_object()) fail("{}: expected a JSON object", source);
  if (const json* type = find_key(config, "model_type"); type && *type == "gemma3") {
    return config_from_hf(gemma3_text_part(config, source), source);
  }
  ModelConfig c;
  c.arch = arch_from_hf(config, source);
  c.activation = read_hf_activation(config, source, c.arch);
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
  c.tie_word_embeddings = json_bool(config, "tie_word_embeddings", source, is_gemma(c.arch));
  // A base model (architectures "...Model", as embedding checkpoints such as Qwen3-Embedding are
  // saved) has no output projection: its embedding matrix stands in, so that it loads. What it
  // generates means nothing; its hidden states, which /v1/embeddings pools, are what it is for.
  if (const json* a = find_key(config, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    const auto name = (*a)[0].get<std::string>();
    if (name.ends_with("Model") && !name.ends_with("LMHeadModel")) c.tie_word_embeddings = true;
  }
  c.qkv_bias = c.arch == Arch::Qwen2 || json_bool(config, "attention_bias", source, false);
  c.qk_norm = c.arch == Arch::Qwen3 || c.arch == Arch::Gemma3 || c.arch == Arch::Qwen3Moe;
  if (c.arch == Arch::Mixtral || c.arch == Arch::Qwen3Moe) read_hf_moe(config, source, c);
  c.eos_token_ids = json_token_ids(config, "eos_token_id", source);
  c.layer_windows = read_hf_windows(config, source, c);
  read_hf_rope(config, source, c);
  if (is_gemma(c.arch)) read_hf_gemma(config, source, c);
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
  } else if (arch == "gemma2") {
    c.arch = Arch::Gemma2;
  } else if (arch == "gemma3") {
    c.arch = Arch::Gemma3;
    c.qk_norm = true;
  } else if (arch == "phi3") {
    c.arch = Arch::Phi3;
  } else if (arch == "qwen3moe") {
    c.arch = Arch::Qwen3Moe;
    c.qk_norm = true;
  } else {
    fail("{}: architecture \"{}\" is not supported (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3, qwen3moe)",
         gguf.path(), arch);
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
  if (auto eos = gguf.get_uint_opt("tokenizer.ggml.eos_token_id")) {
    if (*eos > INT32_MAX) fail("{}: tokenizer.ggml.eos_token_id = {} is not a token id", gguf.path(), *eos);
    c.eos_token_ids.push_back(static_cast<int>(*eos));
  }
  if (is_gemma(c.arch)) read_gguf_gemma(gguf, arch, c);
  if (c.arch == Arch::Phi3) read_gguf_phi3(gguf, arch, c);
  read_gguf_moe(gguf, arch, c);
  if (c.arch == Arch::Llama && c.n_experts > 0) c.arch = Arch::Mixtral;
  c.validate(gguf.path());
  return c;
}

std::vector<float> rope_inv_freq(const ModelConfig& config, const std::vector<float>* freq_factors, int context) {
  const int dims = config.rope_dims(), half = dims / 2;
  std::vector<float> inv_freq(half);
  const auto& s = config.rope_scaling;
  for (int i = 0; i < half; ++i) {
    // Hugging Face rounds the base frequencies to fp32 before scaling them; so do we.
    double freq = static_cast<float>(1.0 / std::pow(config.rope_theta, 2.0 * i / dims));
    if (freq_factors) {
      freq /= (*freq_factors)[i];
    } else if (s.kind == RopeScaling::Kind::LongRope) {
      // transformers: 1 / (factor * base^(2i/d)) in fp32
      const auto& factors = context > s.original_max_position ? s.long_factor : s.short_factor;
      freq = 1.0f / (factors[i] * static_cast<float>(std::pow(config.rope_theta, 2.0 * i / dims)));
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

double rope_attention_factor(const ModelConfig& config) {
  return config.rope_scaling.kind == RopeScaling::Kind::LongRope ? config.rope_scaling.attention_factor : 1.0;
}

std::vector<float> rope_inv_freq_local(const ModelConfig& config) {
  if (!config.rope_local_theta) return rope_inv_freq(config);
  ModelConfig local = config;
  local.rope_theta = *config.rope_local_theta;
  local.rope_scaling = {};
  return rope_inv_freq(local);
}

}  // namespace rf
