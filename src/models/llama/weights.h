#pragma once
// The Llama family's weights (Llama 2/3, Mistral, Qwen2, Qwen3, Gemma 2/3), read by name from a
// checkpoint's tensors: the matrices stay views in their stored types, the small 1-D parameters
// become fp32. Norm weights are what the norms multiply by, as llama.cpp's files store them: 1 + w
// for Gemma's Hugging Face checkpoints, which store w. A multimodal Gemma 3's language model is read
// from where transformers keeps it, its vision tower ignored. The backends' forwards see only
// LlamaWeights.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "formats/weight_matrix.h"

namespace rf {

struct ModelConfig;

// A 1-D parameter (norm weight, bias), converted to fp32 at load time: they are tiny.
using Vector = std::vector<float>;

struct LayerWeights {
  Vector attn_norm;
  WeightMatrix wq, wk, wv, wo;
  std::optional<Vector> bq, bk, bv;          // Qwen2
  std::optional<Vector> q_norm, k_norm;      // Qwen3, Gemma 3, head_dim wide
  std::optional<Vector> post_attn_norm;      // Gemma: on the attention's output, before the residual add
  Vector ffn_norm;
  WeightMatrix w_gate, w_up, w_down;
  std::optional<Vector> post_ffn_norm;       // Gemma: on the MLP's output, before the residual add
  // A sparse layer's MLP (ModelConfig::is_moe; w_gate, w_up, w_down then stay empty): the router
  // [n_experts, hidden] and each expert's own SwiGLU, one view per expert ([expert_ffn, hidden] for
  // gate and up, [hidden, expert_ffn] for down). A Hugging Face folder stores every expert's
  // matrices as tensors of their own; a GGUF stacks them, [n_experts, rows, cols], and each view
  // is then one expert's slice (whole rows, so whole quant blocks) of it, expert_stride() apart.
  WeightMatrix router{};
  std::vector<WeightMatrix> expert_gate, expert_up, expert_down;
};

struct LlamaWeights {
  WeightMatrix token_embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Vector output_norm;
  WeightMatrix output;           // [vocab, hidden]; the embedding when tied
  std::optional<std::vector<float>> rope_freq_factors;  // GGUF rope_freqs
};

namespace llama {

// The tensor names: transformers' (model.layers.0.self_attn.q_proj.weight) or llama.cpp's
// (blk.0.attn_q.weight, plus rope_freqs.weight where llama3 rope scaling is stored as factors).
enum class Naming { HuggingFace, Gguf };

// Every weight the config calls for, with the shape it implies; fails naming the set's source
// and the tensor when one is missing, has another shape, or is a quantized 1-D tensor. Tensors
// the config does not use are ignored. The matrices point into the set's memory.
LlamaWeights read_weights(const TensorSet& tensors, const ModelConfig& config, Naming naming);

// The inverse, for weights built in memory: views of every weight under `naming`'s names (the
// tied output not repeated), 1-D ones as f32, norms as the multipliers llama.cpp stores (Gemma: 1 + w).
// They point into `weights`, which must outlive them.
TensorSet tensor_set(const LlamaWeights& weights, const ModelConfig& config, Naming naming, std::string source);

// Calls fn on every distinct 2-D weight (the tied output once): the embedding, then layer by layer.
void for_each_matrix(const LlamaWeights& weights, const ModelConfig& config,
                     const std::function<void(const WeightMatrix&)>& fn);
// Counted over every weight, the tied output once; rope_freqs, not a trained parameter, left out.
std::size_t parameter_count(const LlamaWeights& weights, const ModelConfig& config);
// Bytes of the 2-D weights, which a forward step reads whole.
std::size_t matrix_bytes(const LlamaWeights& weights, const ModelConfig& config);
// Those a token reads: every expert's count only n_experts_used / n_experts times (a dense model's: matrix_bytes).
std::size_t active_matrix_bytes(const LlamaWeights& weights, const ModelConfig& config);
// Bytes of the sparse layers' experts, all of them (0 for a dense model).
std::size_t expert_matrix_bytes(const LlamaWeights& weights, const ModelConfig& config);
// The bytes from one expert's matrix to the next where they lie evenly in one block (a GGUF's
// stacked tensor: what a grouped GEMM on the GPU would take as one buffer), else 0.
std::size_t expert_stride(const std::vector<WeightMatrix>& experts);
// Distinct stored types of the 2-D weights with their share of the bytes, e.g. "q4_k 83%, q6_k 17%".
std::string dtype_summary(const LlamaWeights& weights, const ModelConfig& config);

}  // namespace llama
}  // namespace rf
