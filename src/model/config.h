#pragma once
// The shape and hyper-parameters of a Llama-family model, read from config.json (both the
// common layout and the transformers 5 one) or from GGUF metadata; nothing is assumed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/rope.h"

namespace rf {

class GgufFile;

enum class Arch { Llama, Mistral, Qwen2, Qwen3 };


struct RopeScaling {
  enum class Kind { None, Linear, Llama3 } kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192.0;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::SplitHalves;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3
  std::vector<std::int32_t> eos_token_ids;  // from config.json / generation_config.json, may be empty
  // Mistral v0.1's sliding-window attention; rocmforge attends to the whole context, which is
  // the same thing only while the context is no longer than the window.
  std::optional<int> sliding_window;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // Checks the values are usable (positive, heads divide evenly, ...); throws naming `source`.
  void validate(const std::string& source) const;
};

std::string arch_name(Arch arch);

// `source` names the file in error messages.
ModelConfig config_from_hf(const nlohmann::json& config, const std::string& source);
ModelConfig config_from_gguf(const GgufFile& gguf);

// Inverse frequencies of each rotated pair (head_dim / 2 values), with the scaling applied.
// `freq_factors`, when given (GGUF's rope_freqs tensor), divides them instead of the scaling rule.
std::vector<float> rope_inv_freq(const ModelConfig& config, const std::vector<float>* freq_factors = nullptr);

}  // namespace rf
