#include "models/llama/cpu_forward.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/probe.h"
#include "backend/cpu/quant.h"
#include "util/thread_pool.h"

namespace rf::llama {

// The CPU backend's kernels and KV cache.
using namespace rf::cpu;

namespace {

void add_bias(std::vector<float>& rows, const std::optional<Vector>& bias, std::size_t n_rows) {
  if (!bias) return;
  const std::size_t width = bias->size();
  for (std::size_t r = 0; r < n_rows; ++r) {
    for (std::size_t i = 0; i < width; ++i) rows[r * width + i] += (*bias)[i];
  }
}

}  // namespace

CpuForward::CpuForward(const ModelConfig& config, const LlamaWeights& weights, ThreadPool& pool, int block_size,
                       int kv_blocks, int max_context)
    : config_(config), weights_(weights), pool_(pool), cache_(config.n_layers, config.kv_dim(), block_size, kv_blocks),
      inv_freq_(rope_inv_freq(config, weights.rope_freq_factors ? &*weights.rope_freq_factors : nullptr,
                              max_context > 0 ? max_context : block_size * kv_blocks)),
      inv_freq_local_(config.rope_local_theta ? rope_inv_freq_local(config) : inv_freq_),
      rope_scale_(static_cast<float>(rope_attention_factor(config))) {}

std::string CpuForward::device_name() const { return fmt::format("cpu ({} threads)", pool_.size()); }

DeviceCeilings CpuForward::measure_ceilings() {
  return {device_name(), measure_read_bandwidth(pool_), measure_matmul_flops(pool_)};
}

void CpuForward::forward(const Batch& batch, std::vector<float>& logits) {
  run_layers(batch);
  output(batch, logits);
}

void CpuForward::hidden_states(const Batch& batch, std::vector<float>& states) {
  run_layers(batch);
  final_norm(batch);
  states.assign(normed_.begin(), normed_.begin() + batch.logit_rows.size() * config_.hidden_size);
}

void CpuForward::run_layers(const Batch& batch) {
  const auto& c = config_;
  const std::size_t n = batch.size();
  check_batch(batch, c.vocab_size, cache_.block_size(), cache_.n_blocks());

  x_.resize(n * c.hidden_size);
  normed_.resize(n * c.hidden_size);
  q_.resize(n * c.q_dim());
  k_.resize(n * c.kv_dim());
  v_.resize(n * c.kv_dim());
  attn_.resize(n * c.q_dim());
  proj_.resize(n * c.hidden_size);
  const std::size_t ffn = std::max(c.intermediate_size, c.expert_ffn);
  gate_.resize(n * ffn);
  up_.resize(n * ffn);

  embed(batch);
  for (int l = 0; l < c.n_layers; ++l) {
    attention_block(batch, l);
    mlp_block(batch, l);
  }
}

template <typename Fn>
void CpuForward::per_token(std::size_t n, Fn fn) {
  pool_.parallel_for(n, 4, [&](std::size_t begin, std::size_t end) {
    for (std::size_t t = begin; t < end; ++t) fn(t);
  });
}

void CpuForward::embed(const Batch& batch) {
  const auto& emb = weights_.token_embedding;
  const std::size_t hidden = config_.hidden_size;
  const std::size_t emb_row_bytes = row_bytes(emb.dtype, emb.cols);
  for (std::size_t t = 0; t < batch.size(); ++t) {
    float* x = &x_[t * hidden];
    dequantize_row(emb.dtype, static_cast<const std::uint8_t*>(emb.data) + batch.tokens[t] * emb_row_bytes, x, hidden);
    if (config_.embedding_scale != 1.0f) {
      for (std::size_t i = 0; i < hidden; ++i) x[i] *= config_.embedding_scale;
    }
  }
}

// Norm, q/k/v, RoPE, the KV cache, attention and its output projection (Gemma: normed again) into
// proj_, which mlp_block adds to the residual x_ in the same pass as its own norm.
void CpuForward::attention_block(const Batch& batch, int l) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[l];
  const std::size_t n = batch.size(), hidden = c.hidden_size;
  per_token(n, [&](std::size_t t) { rms_norm(&x_[t * hidden], w.attn_norm.data(), hidden, c.rms_norm_eps, &normed_[t * hidden]); });
  matmul(w.wq, normed_.data(), n, q_.data(), pool_);
  matmul(w.wk, normed_.data(), n, k_.data(), pool_);
  matmul(w.wv, normed_.data(), n, v_.data(), pool_);
  add_bias(q_, w.bq, n);
  add_bias(k_, w.bk, n);
  add_bias(v_, w.bv, n);
  const float* inv_freq = c.window(l) > 0 ? inv_freq_local_.data() : inv_freq_.data();
  per_token(n, [&](std::size_t t) {
    float* q = &q_[t * c.q_dim()];
    float* k = &k_[t * c.kv_dim()];
    if (c.qk_norm) {
      for (int h = 0; h < c.n_heads; ++h) rms_norm(q + h * c.head_dim, w.q_norm->data(), c.head_dim, c.rms_norm_eps, q + h * c.head_dim);
      for (int h = 0; h < c.n_kv_heads; ++h) rms_norm(k + h * c.head_dim, w.k_norm->data(), c.head_dim, c.rms_norm_eps, k + h * c.head_dim);
    }
    rope(q, c.n_heads, c.head_dim, batch.positions[t], inv_freq, c.rope_layout, c.rope_dims(), rope_scale_);
    rope(k, c.n_kv_heads, c.head_dim, batch.positions[t], inv_freq, c.rope_layout, c.rope_dims(), rope_scale_);
    const std::size_t slot = cache_slot(batch.block_tables[batch.sequence[t]], batch.positions[t], cache_.block_size());
    std::copy_n(k, c.kv_dim(), cache_.key(l, slot));
    std::copy_n(&v_[t * c.kv_dim()], c.kv_dim(), cache_.value(l, slot));
  });
  attention(batch, l);
  matmul(w.wo, attn_.data(), n, proj_.data(), pool_);
  sum_over_ranks(n);
  if (w.post_attn_norm) {
    per_token(n, [&](std::size_t t) { rms_norm(&proj_[t * hidden], w.post_attn_norm->data(), hidden, c.rms_norm_eps, &proj_[t * hidden]); });
  }
}

// The residual add of the attention's output, the MLP's norm, the MLP, and its residual add.
void CpuForward::mlp_block(const Batch& batch, int l) {
  const auto& c = config_;
  const LayerWeights& w = weights_.layers[l];
  const std::size_t n = batch.size(), hidden = c.hidden_size;
  per_token(n, [&](std::size_t t) {
    add_rms_norm(&x_[t * hidden], &proj_[t * hidden], w.ffn_norm.data(), hidden, c.rms_norm_eps, &normed_[t * hidden]);
  });
  if (c.is_moe(l)) {
    sparse_mlp(w, n);
  } else {
    dense_mlp(w, n);
  }
  sum_over_ranks(n);
  if (w.post_ffn_norm) {
    per_token(n, [&](std::size_t t) { rms_norm(&proj_[t * hidden], w.post_ffn_norm->data(), hidden, c.rms_norm_eps, &proj_[t * hidden]); });
  }
  for (std::size_t i = 0; i < n * hidden; ++i) x_[i] += proj_[i];
}

void CpuForward::sum_over_ranks(std::size_t n) {
  if (rank_sum_) rank_sum_(std::span(proj_.data(), n * config_.hidden_size));
}

// out = down(act(gate(in)) * up(in)) for `rows` rows of `in`, through gate_ and up_ (ffn wide): the
// dense MLP and each expert's.
void CpuForward::gated_mlp(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                           std::size_t rows, std::size_t ffn, float* out) {
  matmul(gate, in, rows, gate_.data(), pool_);
  matmul(up, in, rows, up_.data(), pool_);
  const auto activate = config_.activation == MlpActivation::GeluTanh ? gelu_tanh_mul : silu_mul;
  per_token(rows, [&](std::size_t t) { activate(&gate_[t * ffn], &up_[t * ffn], ffn, &gate_[t * ffn]); });
  matmul(down, gate_.data(), rows, out, pool_);
}

// normed_ through the MLP into proj_.
void CpuForward::dense_mlp(const LayerWeights& w, std::size_t n) {
  gated_mlp(w.w_gate, w.w_up, w.w_down, normed_.data(), n, config_.intermediate_size, proj_.data());
}

// normed_ through a sparse layer's experts into proj_: each token to the experts its router picks
// (moe.h), each expert's three matrices read once for all the tokens routed to it, the weighted
// outputs added up in expert order. Experts no token picked are not read.
void CpuForward::sparse_mlp(const LayerWeights& w, std::size_t n) {
  const auto& c = config_;
  const std::size_t hidden = c.hidden_size, ffn = c.expert_ffn, n_experts = c.n_experts, k = c.n_experts_used;
  router_logits_.resize(n * n_experts);
  matmul(w.router, normed_.data(), n, router_logits_.data(), pool_);
  choices_.resize(n * k);
  per_token(n, [&](std::size_t t) {
    route(&router_logits_[t * n_experts], c.n_experts, c.n_experts_used, c.norm_topk_prob, &choices_[t * k]);
  });
  group_by_expert(choices_, static_cast<int>(n), c.n_experts_used, c.n_experts, groups_);
  expert_in_.resize(n * hidden);
  expert_out_.resize(n * hidden);
  std::fill_n(proj_.begin(), n * hidden, 0.0f);
  for (std::size_t e = 0; e < n_experts; ++e) {
    const std::size_t first = groups_.begin[e], m = groups_.begin[e + 1] - first;
    if (m == 0) continue;
    for (std::size_t i = 0; i < m; ++i) {
      std::copy_n(&normed_[groups_.tokens[first + i] * hidden], hidden, &expert_in_[i * hidden]);
    }
    gated_mlp(w.expert_gate[e], w.expert_up[e], w.expert_down[e], expert_in_.data(), m, ffn, expert_out_.data());
    for (std::size_t i = 0; i < m; ++i) {
      float* out = &proj_[groups_.tokens[first + i] * hidden];
      const float weight = groups_.weights[first + i];
      for (std::size_t j = 0; j < hidden; ++j) out[j] += weight * expert_out_[i * hidden + j];
    }
  }
}

void CpuForward::final_norm(const Batch& batch) {
  const std::size_t hidden = config_.hidden_size;
  for (std::size_t r = 0; r < batch.logit_rows.size(); ++r) {
    const std::size_t t = batch.logit_rows[r];
    rms_norm(&x_[t * hidden], weights_.output_norm.data(), hidden, config_.rms_norm_eps, &normed_[r * hidden]);
  }
}

void CpuForward::output(const Batch& batch, std::vector<float>& logits) {
  const auto& c = config_;
  const std::size_t n_out = batch.logit_rows.size();
  final_norm(batch);
  logits.resize(n_out * c.vocab_size);
  matmul(weights_.output, normed_.data(), n_out, logits.data(), pool_);
  if (c.final_logit_softcap > 0) softcap(logits.data(), logits.size(), static_cast<float>(c.final_logit_softcap));
}

// Each token attends to the cached keys of its sequence up to its own position: all of them, or on
// a sliding-window layer the last window of them. Blocks before the window stay in the cache.
void CpuForward::attention(const Batch& batch, int layer) {
  KvCache& cache = cache_;
  const auto& c = config_;
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = static_cast<float>(c.attention_scale());
  const float cap = static_cast<float>(c.attn_logit_softcap);
  const int window = c.window(layer);
  const std::size_t n = batch.size();
  pool_.parallel_for(n * c.n_heads, 1, [&](std::size_t begin, std::size_t end) {
    std::vector<float> scores;
    for (std::size_t item = begin; item < end; ++item) {
      const std::size_t t = item / c.n_heads;
      const int h = static_cast<int>(item % c.n_heads);
      const int kv_offset = (h / group) * c.head_dim;
      const float* q = &q_[t * c.q_dim() + h * c.head_dim];
      const auto& table = batch.block_tables[batch.sequence[t]];
      const int last = batch.positions[t];  // causal: this token and earlier ones
      const int first = window > 0 ? std::max(0, last - window + 1) : 0;
      const int len = last - first + 1;
      auto slot = [&](int p) { return cache_slot(table, p, cache.block_size()); };
      scores.resize(len);
      for (int i = 0; i < len; ++i) {
        const float* k = cache.key(layer, slot(first + i)) + kv_offset;
        float dot = 0.0f;
        for (int d = 0; d < c.head_dim; ++d) dot += q[d] * k[d];
        scores[i] = dot * scale;
      }
      if (cap > 0) softcap(scores.data(), len, cap);
      softmax(scores.data(), len);
      float* out = &attn_[t * c.q_dim() + h * c.head_dim];
      std::fill_n(out, c.head_dim, 0.0f);
      for (int i = 0; i < len; ++i) {
        const float* v = cache.value(layer, slot(first + i)) + kv_offset;
        for (int d = 0; d < c.head_dim; ++d) out[d] += scores[i] * v[d];
      }
    }
  });
}

}  // namespace rf::llama
