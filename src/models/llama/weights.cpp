#include "models/llama/weights.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/config.h"
#include "util/error.h"

namespace rf::llama {

namespace {

// llama.cpp stores llama3 rope scaling as per-frequency factors instead of metadata.
constexpr const char* kRopeFreqs = "rope_freqs.weight";

// Tensor names of one layer under each naming.
struct LayerNames {
  std::string attn_norm, q, k, v, o, q_bias, k_bias, v_bias, q_norm, k_norm, post_attn_norm, ffn_norm, gate, up,
      down, post_ffn_norm;
};

// transformers' post_attention_layernorm is the MLP's input norm in Llama and the attention's
// output norm in Gemma, whose MLP's input norm is pre_feedforward_layernorm.
LayerNames layer_names(Naming naming, int i) {
  if (naming == Naming::HuggingFace) {
    const std::string p = fmt::format("model.layers.{}.", i);
    return {p + "input_layernorm.weight", p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
            p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight", p + "self_attn.q_proj.bias",
            p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias", p + "self_attn.q_norm.weight",
            p + "self_attn.k_norm.weight", p + "post_attention_layernorm.weight",
            p + "post_attention_layernorm.weight", p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
            p + "mlp.down_proj.weight", p + "post_feedforward_layernorm.weight"};
  }
  const std::string p = fmt::format("blk.{}.", i);
  return {p + "attn_norm.weight", p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight",
          p + "attn_output.weight", p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias",
          p + "attn_q_norm.weight", p + "attn_k_norm.weight", p + "post_attention_norm.weight", p + "ffn_norm.weight",
          p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight", p + "post_ffw_norm.weight"};
}

LayerNames layer_names(Naming naming, int i, const ModelConfig& c) {
  LayerNames n = layer_names(naming, i);
  if (c.post_norms && naming == Naming::HuggingFace) {
    n.ffn_norm = fmt::format("model.layers.{}.pre_feedforward_layernorm.weight", i);
  }
  return n;
}

// A sparse layer's router and experts: Hugging Face stores each expert's matrices apart, under
// `expert` with {} for the expert's index; llama.cpp stacks them, under `expert` itself.
struct ExpertNames {
  std::string router, gate, up, down;
};

ExpertNames expert_names(Naming naming, int i, const ModelConfig& c) {
  if (naming == Naming::Gguf) {
    const std::string p = fmt::format("blk.{}.", i);
    return {p + "ffn_gate_inp.weight", p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight", p + "ffn_down_exps.weight"};
  }
  const std::string p = fmt::format("model.layers.{}.", i);
  if (c.arch == Arch::Mixtral) {
    const std::string e = p + "block_sparse_moe.experts.{}.";
    return {p + "block_sparse_moe.gate.weight", e + "w1.weight", e + "w3.weight", e + "w2.weight"};
  }
  const std::string e = p + "mlp.experts.{}.";
  return {p + "mlp.gate.weight", e + "gate_proj.weight", e + "up_proj.weight", e + "down_proj.weight"};
}

// Visits a sparse layer's router as a matrix, then its experts: one matrix per expert under Hugging
// Face names, or visit(name, experts, n_experts, rows, cols) for llama.cpp's stacked tensors.
template <typename Layer, typename Visit>
void visit_experts(Layer& l, int i, const ModelConfig& c, Naming naming, Visit& visit) {
  const ExpertNames n = expert_names(naming, i, c);
  visit(n.router, l.router, c.n_experts, c.hidden_size);
  const std::pair<const std::string&, decltype((l.expert_gate))> kinds[] = {
      {n.gate, l.expert_gate}, {n.up, l.expert_up}, {n.down, l.expert_down}};
  for (const auto& [name, experts] : kinds) {
    const bool down = &experts == &l.expert_down;
    const int rows = down ? c.hidden_size : c.expert_ffn, cols = down ? c.expert_ffn : c.hidden_size;
    if (naming == Naming::Gguf) {
      visit(name, experts, c.n_experts, rows, cols);
      continue;
    }
    if constexpr (!std::is_const_v<Layer>) experts.resize(c.n_experts);
    for (int e = 0; e < c.n_experts; ++e) visit(fmt::format(fmt::runtime(name), e), experts[e], rows, cols);
  }
}

struct GlobalNames {
  std::string embedding, output_norm, output;
};

GlobalNames global_names(Naming naming) {
  if (naming == Naming::HuggingFace) return {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
  return {"token_embd.weight", "output_norm.weight", "output.weight"};
}

// The one list of a Llama model's tensors: calls visit(name, member, rows, cols) for each matrix and
// visit(name, member, n) for each 1-D weight (a Vector, or an optional one where the config calls
// for it), in the order of llama.cpp's files, and visit(name, experts, n, rows, cols) for llama.cpp's
// stacked experts (visit_experts). The tied output and rope_freqs are the caller's.
// `Weights` is LlamaWeights (to fill it, its layers sized already) or const LlamaWeights.
template <typename Weights, typename Visit>
void for_each_tensor(Weights& w, const ModelConfig& c, Naming naming, Visit&& visit) {
  const GlobalNames global = global_names(naming);
  visit(global.embedding, w.token_embedding, c.vocab_size, c.hidden_size);
  visit(global.output_norm, w.output_norm, c.hidden_size);
  if (!c.tie_word_embeddings) visit(global.output, w.output, c.vocab_size, c.hidden_size);
  for (int i = 0; i < c.n_layers; ++i) {
    const LayerNames n = layer_names(naming, i, c);
    auto& l = w.layers[i];
    visit(n.attn_norm, l.attn_norm, c.hidden_size);
    visit(n.q, l.wq, c.q_dim(), c.hidden_size);
    visit(n.k, l.wk, c.kv_dim(), c.hidden_size);
    visit(n.v, l.wv, c.kv_dim(), c.hidden_size);
    visit(n.o, l.wo, c.hidden_size, c.q_dim());
    if (c.qkv_bias) {
      visit(n.q_bias, l.bq, c.q_dim());
      visit(n.k_bias, l.bk, c.kv_dim());
      visit(n.v_bias, l.bv, c.kv_dim());
    }
    if (c.qk_norm) {
      visit(n.q_norm, l.q_norm, c.head_dim);
      visit(n.k_norm, l.k_norm, c.head_dim);
    }
    if (c.post_norms) visit(n.post_attn_norm, l.post_attn_norm, c.hidden_size);
    visit(n.ffn_norm, l.ffn_norm, c.hidden_size);
    if (c.is_moe(i)) {
      visit_experts(l, i, c, naming, visit);
    } else {
      visit(n.gate, l.w_gate, c.intermediate_size, c.hidden_size);
      visit(n.up, l.w_up, c.intermediate_size, c.hidden_size);
      visit(n.down, l.w_down, c.hidden_size, c.intermediate_size);
    }
    if (c.post_norms) visit(n.post_ffn_norm, l.post_ffn_norm, c.hidden_size);
  }
}

// Gemma's Hugging Face checkpoints store w for RMSNorms that multiply by 1 + w (Gemma's
// convention, in fp32 as transformers computes it); llama.cpp's converter adds the 1 itself.
void add_one_to_norms(LlamaWeights& w) {
  const auto add = [](Vector& v) {
    for (float& x : v) x += 1.0f;
  };
  add(w.output_norm);
  for (LayerWeights& l : w.layers) {
    for (Vector* v : {&l.attn_norm, &l.ffn_norm}) add(*v);
    for (std::optional<Vector>* v : {&l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm}) {
      if (*v) add(**v);
    }
  }
}

// One visitor from several lambdas.
template <typename... Fn>
struct Overloaded : Fn... {
  using Fn::operator()...;
};
template <typename... Fn>
Overloaded(Fn...) -> Overloaded<Fn...>;  // clang before 17 deduces no aggregate's arguments by itself

// Where a Hugging Face checkpoint keeps its language model: "model." and "lm_head.weight", or in a
// multimodal Gemma 3 "language_model.model." and "language_model.lm_head.weight" (as transformers
// 4.50 saved them) or "model.language_model." and "lm_head.weight" (since 4.52), or at the top in
// a base model's checkpoint (transformers' Qwen3Model and the like, as embedding models are saved).
struct HfPlace {
  std::string model = "model.", lm_head = "lm_head.weight";
};

HfPlace hf_place(const TensorSet& tensors) {
  if (tensors.find("language_model.model.embed_tokens.weight")) {
    return {"language_model.model.", "language_model.lm_head.weight"};
  }
  if (tensors.find("model.language_model.embed_tokens.weight")) return {"model.language_model.", "lm_head.weight"};
  if (tensors.find("embed_tokens.weight")) return {"", "lm_head.weight"};
  return {};
}

// Fills the weights it visits from the set, checking each tensor's shape against the config. Hugging
// Face names are looked up where `place` says (for_each_tensor names them "model." and "lm_head").
class Reader {
 public:
  explicit Reader(const TensorSet& tensors, HfPlace place = {}) : tensors_(tensors), place_(std::move(place)) {}

  void operator()(const std::string& name, WeightMatrix& m, int rows, int cols) const {
    const TensorView& t = weight(name, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)});
    m = {t.dtype, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), t.data};
  }
  // llama.cpp's stacked experts: one view per expert, each its slice of whole rows.
  void operator()(const std::string& name, std::vector<WeightMatrix>& experts, int n, int rows, int cols) const {
    const TensorView& t = weight(name, {static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(rows),
                                        static_cast<std::uint64_t>(cols)});
    const std::size_t stride = rows * row_bytes(t.dtype, cols);
    experts.resize(n);
    for (int e = 0; e < n; ++e) {
      experts[e] = {t.dtype, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols),
                    static_cast<const std::uint8_t*>(t.data) + e * stride};
    }
  }
  void operator()(const std::string& name, Vector& v, int n) const { v = vector(name, n); }
  void operator()(const std::string& name, std::optional<Vector>& v, int n) const { v = vector(name, n); }

  std::optional<Vector> optional_vector(const std::string& name, int n) const {
    if (!tensors_.find(name)) return std::nullopt;
    return vector(name, n);
  }

 private:
  const TensorView& weight(const std::string& name, std::initializer_list<std::uint64_t> expected) const {
    const TensorView& t = get(name, expected);
    if (is_auxiliary(t.dtype)) fail("{}: tensor {} is {}, not a weight type", tensors_.source(), name, dtype_name(t.dtype));
    return t;
  }

  Vector vector(const std::string& name, int n) const {
    const TensorView& t = get(name, {static_cast<std::uint64_t>(n)});
    return to_f32(tensors_.source(), t);
  }

  std::string stored_name(const std::string& name) const {
    if (name == "lm_head.weight") return place_.lm_head;
    if (name.starts_with("model.")) return place_.model + name.substr(6);
    return name;
  }

  const TensorView& get(const std::string& given, std::initializer_list<std::uint64_t> expected) const {
    const std::string name = stored_name(given);
    const TensorView* t = tensors_.find(name);
    if (!t) fail("{}: tensor {} is missing", tensors_.source(), name);
    if (!std::ranges::equal(t->dims(), expected)) {
      fail("{}: tensor {} has shape {}, expected [{}] from the model's config", tensors_.source(), name,
           t->shape_string(), fmt::join(expected, ", "));
    }
    return *t;
  }

  const TensorSet& tensors_;
  HfPlace place_;
};

// Phi-3 stacks q, k and v in one matrix (qkv_proj; GGUF attn_qkv) and the MLP's gate and up in
// another (gate_up_proj; GGUF ffn_up, twice as tall, with no ffn_gate). Their rows are split into
// Llama's tensors as views of byte ranges: a row is whole blocks in every stored type, quantized
// ones included, so each part is a valid matrix of the same type. The other tensors are kept.
class FusedSplitter {
 public:
  FusedSplitter(const TensorSet& tensors, const ModelConfig& c) : in_(tensors), out_(tensors.source()), c_(c) {}

  TensorSet split(Naming naming, const HfPlace& place) {
    const std::uint64_t q = c_.q_dim(), kv = c_.kv_dim(), ffn = c_.intermediate_size;
    for (int i = 0; i < c_.n_layers; ++i) {
      const LayerNames n = layer_names(naming, i);
      const std::string p = naming == Naming::HuggingFace ? fmt::format("{}layers.{}.", place.model, i)
                                                          : fmt::format("blk.{}.", i);
      const auto hf = [&](const std::string& name) { return name.substr(0, 6) == "model." ? place.model + name.substr(6) : name; };
      if (naming == Naming::HuggingFace) {
        split_rows(p + "self_attn.qkv_proj.weight", {{hf(n.q), q}, {hf(n.k), kv}, {hf(n.v), kv}});
        split_rows(p + "mlp.gate_up_proj.weight", {{hf(n.gate), ffn}, {hf(n.up), ffn}});
      } else {
        if (in_.find(p + "attn_qkv.weight")) split_rows(p + "attn_qkv.weight", {{n.q, q}, {n.k, kv}, {n.v, kv}});
        if (!in_.find(n.gate)) split_rows(n.up, {{n.gate, ffn}, {n.up, ffn}});
      }
    }
    for (const TensorView& t : in_) {
      if (!fused_.contains(t.name)) out_.add(t);
    }
    return std::move(out_);
  }

 private:
  struct Part {
    std::string name;
    std::uint64_t rows;
  };

  void split_rows(const std::string& name, std::initializer_list<Part> parts) {
    const TensorView* t = in_.find(name);
    if (!t) fail("{}: tensor {} is missing", in_.source(), name);
    std::uint64_t rows = 0;
    for (const Part& part : parts) rows += part.rows;
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != static_cast<std::uint64_t>(c_.hidden_size)) {
      fail("{}: tensor {} has shape {}, expected [{}, {}] from the model's config", in_.source(), name,
           t->shape_string(), rows, c_.hidden_size);
    }
    const auto* data = static_cast<const std::uint8_t*>(t->data);
    for (const Part& part : parts) {
      const std::uint64_t shape[] = {part.rows, t->shape[1]};
      out_.add(make_tensor_view(in_.source(), part.name, t->dtype, shape, part.rows * t->row_bytes(), data));
      data += part.rows * t->row_bytes();
    }
    fused_.insert(name);
  }

  const TensorSet& in_;
  TensorSet out_;
  const ModelConfig& c_;
  std::set<std::string> fused_;
};

}  // namespace

void for_each_matrix(const LlamaWeights& w, const ModelConfig& c, const std::function<void(const WeightMatrix&)>& fn) {
  for_each_tensor(w, c, Naming::Gguf,
                  Overloaded{[&](const std::string&, const WeightMatrix& m, int, int) { fn(m); },
                             [&](const std::string&, const std::vector<WeightMatrix>& experts, int, int, int) {
                               for (const WeightMatrix& m : experts) fn(m);
                             },
                             [](const std::string&, const auto&, int) {}});
}

LlamaWeights read_weights(const TensorSet& stored, const ModelConfig& config, Naming naming) {
  // Each layer has tensors of its own. A config naming more layers than the checkpoint has tensors
  // is refused before anything is sized by it (a GGUF's block_count of 2^30 asked for 90 GB).
  if (static_cast<std::size_t>(config.n_layers) > stored.size()) {
    fail("{}: the config names {} layers, but the checkpoint holds only {} tensors", stored.source(), config.n_layers,
         stored.size());
  }
  const HfPlace place = naming == Naming::HuggingFace ? hf_place(stored) : HfPlace{};
  const TensorSet split = config.arch == Arch::Phi3 ? FusedSplitter(stored, config).split(naming, place) : TensorSet();
  const TensorSet& tensors = config.arch == Arch::Phi3 ? split : stored;
  const Reader reader(tensors, place);
  LlamaWeights w;
  w.layers.resize(config.n_layers);
  for_each_tensor(w, config, naming, reader);
  if (naming == Naming::HuggingFace && is_gemma(config.arch)) add_one_to_norms(w);
  if (config.tie_word_embeddings) w.output = w.token_embedding;
  if (naming == Naming::Gguf) w.rope_freq_factors = reader.optional_vector(kRopeFreqs, config.rope_dims() / 2);
  return w;
}

TensorSet tensor_set(const LlamaWeights& weights, const ModelConfig& config, Naming naming, std::string source) {
  TensorSet set(std::move(source));
  const auto add_vector = [&](const std::string& name, const Vector& v) {
    const std::uint64_t n = v.size();
    set.add(make_tensor_view(set.source(), name, DType::F32, {&n, 1}, n * sizeof(float), v.data()));
  };
  for_each_tensor(weights, config, naming,
                  Overloaded{[&](const std::string& name, const WeightMatrix& m, int, int) {
                               const std::uint64_t shape[] = {m.rows, m.cols};
                               set.add(make_tensor_view(set.source(), name, m.dtype, shape, m.bytes(), m.data));
                             },
                             [&](const std::string& name, const std::vector<WeightMatrix>& experts, int n, int rows,
                                 int cols) {
                               const WeightMatrix& first = experts.at(0);
                               if (n > 1 && expert_stride(experts) != first.bytes()) {
                                 fail("{}: the experts of {} do not lie back to back", set.source(), name);
                               }
                               const std::uint64_t shape[] = {static_cast<std::uint64_t>(n),
                                                              static_cast<std::uint64_t>(rows),
                                                              static_cast<std::uint64_t>(cols)};
                               set.add(make_tensor_view(set.source(), name, first.dtype, shape, n * first.bytes(),
                                                        first.data));
                             },
                             [&](const std::string& name, const Vector& v, int) { add_vector(name, v); },
                             [&](const std::string& name, const std::optional<Vector>& v, int) {
                               if (v) add_vector(name, *v);
                             }});
  if (naming == Naming::Gguf && weights.rope_freq_factors) add_vector(kRopeFreqs, *weights.rope_freq_factors);
  return set;
}

std::size_t parameter_count(const LlamaWeights& weights, const ModelConfig& config) {
  std::size_t n = 0;
  for_each_tensor(weights, config, Naming::Gguf,
                  Overloaded{[&](const std::string&, const WeightMatrix& m, int, int) { n += m.rows * m.cols; },
                             [&](const std::string&, const std::vector<WeightMatrix>& experts, int, int, int) {
                               for (const WeightMatrix& m : experts) n += m.rows * m.cols;
                             },
                             [&](const std::string&, const Vector& v, int) { n += v.size(); },
                             [&](const std::string&, const std::optional<Vector>& v, int) { n += v ? v->size() : 0; }});
  return n;
}

std::size_t matrix_bytes(const LlamaWeights& weights, const ModelConfig& config) {
  std::size_t bytes = 0;
  for_each_matrix(weights, config, [&](const WeightMatrix& m) { bytes += m.bytes(); });
  return bytes;
}

std::size_t expert_matrix_bytes(const LlamaWeights& weights, const ModelConfig& config) {
  std::size_t experts = 0;
  for (int i = 0; i < config.n_layers; ++i) {
    const LayerWeights& l = weights.layers[i];
    for (const auto* set : {&l.expert_gate, &l.expert_up, &l.expert_down}) {
      for (const WeightMatrix& m : *set) experts += m.bytes();
    }
  }
  return experts;
}

std::size_t active_matrix_bytes(const LlamaWeights& weights, const ModelConfig& config) {
  const std::size_t all = matrix_bytes(weights, config);
  if (config.n_experts == 0) return all;
  const std::size_t experts = expert_matrix_bytes(weights, config);
  return all - experts + experts / config.n_experts * config.n_experts_used;
}

std::size_t expert_stride(const std::vector<WeightMatrix>& experts) {
  if (experts.size() < 2) return experts.empty() ? 0 : experts[0].bytes();
  const auto* first = static_cast<const std::uint8_t*>(experts[0].data);
  const auto stride = static_cast<const std::uint8_t*>(experts[1].data) - first;
  if (stride < static_cast<std::ptrdiff_t>(experts[0].bytes())) return 0;
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const WeightMatrix& m = experts[e];
    if (m.dtype != experts[0].dtype || m.rows != experts[0].rows || m.cols != experts[0].cols ||
        static_cast<const std::uint8_t*>(m.data) != first + e * stride) {
      return 0;
    }
  }
  return static_cast<std::size_t>(stride);
}

std::string dtype_summary(const LlamaWeights& weights, const ModelConfig& config) {
  std::map<std::string_view, std::size_t> bytes_by_type;
  std::size_t total = 0;
  for_each_matrix(weights, config, [&](const WeightMatrix& m) {
    const std::size_t b = m.bytes();
    bytes_by_type[dtype_name(m.dtype)] += b;
    total += b;
  });
  std::vector<std::string> parts;
  for (const auto& [name, b] : bytes_by_type) parts.push_back(fmt::format("{} {:.0f}%", name, 100.0 * b / total));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace rf::llama
