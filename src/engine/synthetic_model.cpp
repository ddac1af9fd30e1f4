#include "engine/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include <fmt/format.h>

#include "backend/cpu/quant.h"
#include "util/error.h"

namespace rf {

namespace {

struct Shape {
  const char* name;
  Arch arch;
  int hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, context;
  double rope_theta;
  bool tied;
  int experts = 0, experts_used = 0, expert_ffn = 0;  // a mixture of experts: every layer sparse
};

// Published shapes: Llama 3.2 1B, Llama 3.1 8B, Qwen3 8B, Mistral 7B v0.3, Gemma 2 2B, Gemma 3 4B,
// Mixtral 8x7B, Qwen3-30B-A3B.
constexpr Shape kShapes[] = {
    {"llama3-1b", Arch::Llama, 2048, 8192, 16, 32, 8, 64, 128256, 131072, 500000.0, true},
    {"llama3-8b", Arch::Llama, 4096, 14336, 32, 32, 8, 128, 128256, 131072, 500000.0, false},
    {"llama3-70b", Arch::Llama, 8192, 28672, 80, 64, 8, 128, 128256, 131072, 500000.0, false},
    {"qwen3-8b", Arch::Qwen3, 4096, 12288, 36, 32, 8, 128, 151936, 40960, 1000000.0, false},
    {"mistral-7b", Arch::Mistral, 4096, 14336, 32, 32, 8, 128, 32768, 32768, 1000000.0, false},
    {"gemma2-2b", Arch::Gemma2, 2304, 9216, 26, 8, 4, 256, 256000, 8192, 10000.0, true},
    {"gemma3-4b", Arch::Gemma3, 2560, 10240, 34, 8, 4, 256, 262208, 131072, 1000000.0, true},
    {"mixtral-8x7b", Arch::Mixtral, 4096, 14336, 32, 32, 8, 128, 32000, 32768, 1000000.0, false, 8, 2, 14336},
    {"qwen3-30b-a3b", Arch::Qwen3Moe, 2048, 6144, 48, 32, 4, 128, 151936, 40960, 1000000.0, false, 128, 8, 768},
};

// Gemma's pieces as its configs set them: GeGLU, post-norms, sqrt(hidden) on the embeddings, head_dim's
// attention scale, Gemma 2's soft caps and every other layer sliding over 4096 positions, Gemma 3's
// q/k norms and five in six layers over 1024 with their own RoPE base.
void set_gemma(ModelConfig& c) {
  const bool gemma2 = c.arch == Arch::Gemma2;
  c.activation = MlpActivation::GeluTanh;
  c.post_norms = true;
  c.embedding_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.query_pre_attn_scalar = c.head_dim;
  c.attn_logit_softcap = gemma2 ? 50.0 : 0.0;
  c.final_logit_softcap = gemma2 ? 30.0 : 0.0;
  c.qk_norm = !gemma2;
  set_gemma_windows(c, gemma2 ? 4096 : 1024);
  if (!gemma2) c.rope_local_theta = 10000.0;
}

const Shape& find_shape(const std::string& name) {
  for (const auto& s : kShapes) {
    if (name == s.name) return s;
  }
  fail("unknown synthetic model \"{}\" (known: {})", name, fmt::join(synthetic_model_names(), ", "));
}

class WeightFactory {
 public:
  WeightFactory(DType dtype, std::uint64_t seed) : dtype_(dtype), rng_(seed) {}

  // Rows repeat every kDistinctRows rows, unless `distinct` (a router, whose repeated rows would tie
  // its experts).
  WeightMatrix matrix(std::size_t rows, std::size_t cols, std::optional<DType> type = {}, bool distinct = false) {
    const DType dtype = stored_type(type.value_or(dtype_), cols);
    auto& bytes = storage_.emplace_back(rows * row_bytes(dtype, cols));
    fill(dtype, rows, cols, distinct ? rows : kDistinctRows, bytes.data());
    return {dtype, rows, cols, bytes.data()};
  }

  // `count` matrices back to back in one allocation, as a GGUF stacks a layer's experts: their rows
  // repeat the same kDistinctRows (quantizing each expert's own would take minutes for 128 experts).
  std::vector<WeightMatrix> stacked(int count, std::size_t rows, std::size_t cols) {
    const DType dtype = stored_type(dtype_, cols);
    const std::size_t bytes_each = rows * row_bytes(dtype, cols);
    auto& bytes = storage_.emplace_back(count * bytes_each);
    fill(dtype, count * rows, cols, kDistinctRows, bytes.data());
    std::vector<WeightMatrix> matrices;
    for (int e = 0; e < count; ++e) matrices.push_back({dtype, rows, cols, bytes.data() + e * bytes_each});
    return matrices;
  }

  Vector norm(std::size_t n) {
    std::uniform_real_distribution<float> around_one(0.9f, 1.1f);
    Vector v(n);
    for (auto& x : v) x = around_one(rng_);
    return v;
  }

  std::vector<std::vector<std::uint8_t>> take_storage() { return std::move(storage_); }

 private:
  static constexpr std::size_t kDistinctRows = 16;

  static DType stored_type(DType dtype, std::size_t cols) {
    return cols % dtype_info(dtype).block_elems == 0 ? dtype : DType::F16;  // as llama.cpp falls back
  }

  // `rows` rows of random values stored as dtype at `out`, the first `distinct` repeated.
  void fill(DType dtype, std::size_t rows, std::size_t cols, std::size_t distinct, std::uint8_t* out) {
    const std::size_t row_size = row_bytes(dtype, cols);
    std::vector<float> values(cols);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (std::size_t r = 0; r < std::min(rows, distinct); ++r) {
      for (auto& v : values) v = normal(rng_);
      cpu::quantize_row(dtype, values.data(), out + r * row_size, cols);
    }
    for (std::size_t r = distinct; r < rows; ++r) std::memcpy(out + r * row_size, out + (r % distinct) * row_size, row_size);
  }

  DType dtype_;
  std::mt19937_64 rng_;
  std::vector<std::vector<std::uint8_t>> storage_;
};

}  // namespace

std::vector<std::string> synthetic_model_names() {
  std::vector<std::string> names;
  for (const auto& s : kShapes) names.emplace_back(s.name);
  return names;
}

ModelConfig synthetic_model_config(const std::string& name) {
  const Shape& s = find_shape(name);
  ModelConfig c;
  c.arch = s.arch;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.intermediate;
  c.n_layers = s.layers;
  c.n_heads = s.heads;
  c.n_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.vocab_size = s.vocab;
  c.max_position_embeddings = s.context;
  c.rope_theta = s.rope_theta;
  c.tie_word_embeddings = s.tied;
  c.qk_norm = s.arch == Arch::Qwen3 || s.arch == Arch::Qwen3Moe;
  c.rms_norm_eps = 1e-5;
  if (s.experts > 0) {
    c.n_experts = s.experts;
    c.n_experts_used = s.experts_used;
    c.expert_ffn = s.expert_ffn;
    c.norm_topk_prob = true;
    c.moe_layers.assign(c.n_layers, true);
  }
  if (is_gemma(c.arch)) set_gemma(c);
  c.validate(name);
  return c;
}

Checkpoint build_synthetic_model(const std::string& name, DType dtype, std::uint64_t seed) {
  return build_synthetic_model(synthetic_model_config(name), dtype, seed, name);
}

Checkpoint build_synthetic_model(const ModelConfig& c, DType dtype, std::uint64_t seed, const std::string& name) {
  WeightFactory make(dtype, seed);
  LlamaWeights w;
  // llama.cpp keeps embeddings and the output head in at least q6_k/q8_0 for quantized files;
  // use the requested type everywhere for a simple, uniform byte count.
  w.token_embedding = make.matrix(c.vocab_size, c.hidden_size);
  w.output_norm = make.norm(c.hidden_size);
  w.output = c.tie_word_embeddings ? w.token_embedding : make.matrix(c.vocab_size, c.hidden_size);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights layer;
    layer.attn_norm = make.norm(c.hidden_size);
    layer.wq = make.matrix(c.q_dim(), c.hidden_size);
    layer.wk = make.matrix(c.kv_dim(), c.hidden_size);
    layer.wv = make.matrix(c.kv_dim(), c.hidden_size);
    layer.wo = make.matrix(c.hidden_size, c.q_dim());
    if (c.qk_norm) {
      layer.q_norm = make.norm(c.head_dim);
      layer.k_norm = make.norm(c.head_dim);
    }
    if (c.post_norms) layer.post_attn_norm = make.norm(c.hidden_size);
    layer.ffn_norm = make.norm(c.hidden_size);
    if (c.is_moe(l)) {
      // The router in f32, as llama-quantize leaves ffn_gate_inp.
      layer.router = make.matrix(c.n_experts, c.hidden_size, DType::F32, true);
      layer.expert_gate = make.stacked(c.n_experts, c.expert_ffn, c.hidden_size);
      layer.expert_up = make.stacked(c.n_experts, c.expert_ffn, c.hidden_size);
      layer.expert_down = make.stacked(c.n_experts, c.hidden_size, c.expert_ffn);
    } else {
      layer.w_gate = make.matrix(c.intermediate_size, c.hidden_size);
      layer.w_up = make.matrix(c.intermediate_size, c.hidden_size);
      layer.w_down = make.matrix(c.hidden_size, c.intermediate_size);
    }
    if (c.post_norms) layer.post_ffn_norm = make.norm(c.hidden_size);
    w.layers.push_back(std::move(layer));
  }
  return Checkpoint::from_memory("synthetic " + name, c, std::move(w), make.take_storage());
}

}  // namespace rf
