#pragma once
// The shape and hyper-parameters of a Llama-family model (Gemma 2 and 3 included: the same decoder
// with a few more pieces), read from config.json (both the common layout and the transformers 5
// one) or from GGUF metadata; nothing is assumed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/rope.h"

namespace rf {

class GgufFile;

enum class Arch { Llama, Mistral, Qwen2, Qwen3, Gemma2, Gemma3, Phi3, Mixtral, Qwen3Moe };

// The gate's activation in the MLP: down(act(gate(x)) * up(x)).
enum class MlpActivation {
  Silu,      // SwiGLU (Llama, Mistral, Qwen)
  GeluTanh,  // GeGLU with the tanh approximation, transformers' gelu_pytorch_tanh (Gemma)
};


struct RopeScaling {
  enum class Kind { None, Linear, Llama3, LongRope } kind = Kind::None;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192.0;
  // LongRoPE (Phi-3's "longrope", formerly "su"): the frequencies of the rotated pairs are divided by
  // short_factor, or by long_factor for contexts longer than original_max_position, and cos and sin
  // are multiplied by attention_factor (q and k's rotated dimensions grow by it).
  std::vector<float> short_factor, long_factor;
  double attention_factor = 1.0;
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
  // RoPE rotates the first rotary_dim dimensions of each head (partial_rotary_factor * head_dim,
  // Phi-4-mini's 0.75) and passes the rest through; 0 = all of them.
  int rotary_dim = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  bool qk_norm = false;   // Qwen3, Gemma 3
  std::vector<std::int32_t> eos_token_ids;  // from config.json / generation_config.json, may be empty

  // Sliding-window attention, per layer (Mistral v0.1: every layer; Gemma 2: every other one; Gemma
  // 3: five in six): a token at position p attends to the keys at positions p - window < q <= p,
  // as transformers' and llama.cpp's masks have it. 0 = the whole context. Empty: no windows.
  std::vector<int> layer_windows;
  // RoPE base of the sliding-window layers (Gemma 3's rope_local_base_freq), unscaled; the global
  // layers keep rope_theta and rope_scaling. Unset: every layer uses rope_theta and rope_scaling.
  std::optional<double> rope_local_theta;

  // Gemma's additions to the Llama decoder; their defaults leave a Llama model as it is.
  MlpActivation activation = MlpActivation::Silu;
  // Multiplies the embedding rows (Gemma: sqrt(hidden_size), rounded to the checkpoint's dtype).
  float embedding_scale = 1.0f;
  // RMSNorms on the attention's and the MLP's outputs, before their residual adds (Gemma).
  bool post_norms = false;
  // Attention scores are scaled by query_pre_attn_scalar^-1/2 (Gemma) instead of head_dim^-1/2.
  std::optional<double> query_pre_attn_scalar;
  // Soft-capping, cap * tanh(x / cap), of the attention scores and of the final logits; 0 = none.
  double attn_logit_softcap = 0.0;
  double final_logit_softcap = 0.0;

  // Mixture of experts (Mixtral, Qwen3-MoE): a sparse layer's MLP is n_experts SwiGLU experts of
  // width expert_ffn, of which a router picks n_experts_used per token (models/llama/moe.h).
  // n_experts 0: a dense model. moe_layers: which layers are sparse (the others keep the dense
  // MLP of intermediate_size: Qwen3-MoE's mlp_only_layers / decoder_sparse_step); empty when dense.
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_ffn = 0;
  bool norm_topk_prob = true;  // renormalise the chosen experts' weights to sum 1
  std::vector<bool> moe_layers;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int rope_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  bool is_moe(int layer) const { return !moe_layers.empty() && moe_layers[layer]; }
  int window(int layer) const { return layer_windows.empty() ? 0 : layer_windows[layer]; }
  // The smallest window of any layer; 0 when every layer sees the whole context.
  int smallest_window() const;
  double attention_scale() const;
  // Checks the values are usable (positive, heads divide evenly, ...); throws naming `source`.
  void validate(const std::string& source) const;
};

std::string arch_name(Arch arch);
bool is_gemma(Arch arch);
// Gemma's sliding layers, as llama.cpp lays them out: Gemma 2's even layers, five in six of Gemma 3's.
void set_gemma_windows(ModelConfig& config, int window);

// `source` names the file in error messages.
ModelConfig config_from_hf(const nlohmann::json& config, const std::string& source);
ModelConfig config_from_gguf(const GgufFile& gguf);
// A field holding a token id or a list of them (eos_token_id), each checked to be a valid id; empty
// where the field is absent or null. `source` names the file in error messages.
std::vector<std::int32_t> json_token_ids(const nlohmann::json& j, const char* key, const std::string& source);

// Inverse frequencies of each rotated pair (rope_dims() / 2 values), with the scaling applied.
// `freq_factors`, when given (GGUF's rope_freqs tensor), divides them instead of the scaling rule.
// LongRoPE picks its factors once from `context`, the longest sequence the backend serves, as
// llama.cpp does: the long ones where it exceeds original_max_position (transformers instead picks
// by each call's sequence length, which agrees for every sequence when the context is at most
// original_max_position, or when every sequence is longer than it).
std::vector<float> rope_inv_freq(const ModelConfig& config, const std::vector<float>* freq_factors = nullptr,
                                 int context = 0);
// What RoPE multiplies cos and sin by: LongRoPE's attention factor, else 1.
double rope_attention_factor(const ModelConfig& config);
// Those of the sliding-window layers: rope_local_theta's, unscaled (rope_inv_freq's without one).
std::vector<float> rope_inv_freq_local(const ModelConfig& config);

}  // namespace rf
