#include "models/llama/gpu_weights.h"

#include <algorithm>

#include "backend/gpu/quant/device_layout.h"
#include "util/error.h"

namespace rf::llama {

// The GPU backend's kernels and runtime.
using namespace rf::gpu;

GpuWeights::GpuWeights(const ModelConfig& config, const LlamaWeights& host, int context, ProgressFn progress)
    : progress_(std::move(progress)),
      total_(matrix_bytes(host, config)),
      token_embedding(upload(host.token_embedding)),
      output_norm(upload(host.output_norm)),
      output(host.output.data == host.token_embedding.data ? token_embedding : upload(host.output)),
      inv_freq(upload(rf::rope_inv_freq(config, host.rope_freq_factors ? &*host.rope_freq_factors : nullptr, context))),
      inv_freq_local(config.rope_local_theta ? upload(rf::rope_inv_freq_local(config)) : inv_freq),
      rope_scale_squared(static_cast<float>(rf::rope_attention_factor(config) * rf::rope_attention_factor(config))) {
  for (const LayerWeights& l : host.layers) {
    GpuLayer& d = layers.emplace_back();
    d.attn_norm = upload(l.attn_norm);
    const WeightMatrix qkv[] = {l.wq, l.wk, l.wv};
    WeightMatrix views[3];
    d.wqkv = upload_stacked(qkv, views);
    d.wq = views[0], d.wk = views[1], d.wv = views[2];
    d.wo = upload(l.wo);
    d.bq = upload(l.bq), d.bk = upload(l.bk), d.bv = upload(l.bv);
    d.q_norm = upload(l.q_norm), d.k_norm = upload(l.k_norm);
    d.post_attn_norm = upload(l.post_attn_norm);
    d.ffn_norm = upload(l.ffn_norm);
    d.post_ffn_norm = upload(l.post_ffn_norm);
    const WeightMatrix gate_up[] = {l.w_gate, l.w_up};
    WeightMatrix ffn_views[2];
    d.w_gate_up = upload_stacked(gate_up, ffn_views);
    d.w_gate = ffn_views[0], d.w_up = ffn_views[1];
    d.w_down = upload(l.w_down);
    if (l.router.data) {
      d.router = upload(l.router);
      d.experts_gate = upload_experts(l.expert_gate);
      d.experts_up = upload_experts(l.expert_up);
      d.experts_down = upload_experts(l.expert_down);
    }
  }
}

void GpuWeights::uploaded(const WeightMatrix& host) {
  uploaded_ += host.bytes();
  if (progress_) progress_(uploaded_, total_);
}

WeightMatrix GpuWeights::upload(const WeightMatrix& host) {
  matrices_.push_back(upload_weights(host));
  uploaded(host);
  return {host.dtype, host.rows, host.cols, matrices_.back().data()};
}

WeightMatrix GpuWeights::upload_stacked(std::span<const WeightMatrix> parts, std::span<WeightMatrix> views) {
  constexpr std::size_t kAlign = 256;
  const bool stackable = std::all_of(parts.begin(), parts.end(), [&](const WeightMatrix& w) {
    return w.dtype == parts[0].dtype && w.cols == parts[0].cols && w.bytes() % kAlign == 0;
  });
  if (!stackable) {
    std::transform(parts.begin(), parts.end(), views.begin(), [&](const WeightMatrix& w) { return upload(w); });
    return {parts[0].dtype, 0, parts[0].cols, nullptr};
  }
  std::size_t rows = 0, total = 0;
  for (const WeightMatrix& w : parts) rows += w.rows, total += w.bytes();
  DeviceBuffer<std::uint8_t>& stacked = matrices_.emplace_back(total);
  std::uint8_t* at = stacked.data();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    upload_weights(parts[i], at);
    uploaded(parts[i]);
    views[i] = {parts[i].dtype, parts[i].rows, parts[i].cols, at};
    at += parts[i].bytes();
  }
  return {parts[0].dtype, rows, parts[0].cols, stacked.data()};
}

StackedExperts GpuWeights::upload_experts(const std::vector<WeightMatrix>& experts) {
  constexpr std::size_t kAlign = 256;
  const WeightMatrix& first = experts.at(0);
  for (const WeightMatrix& w : experts) {
    if (w.dtype != first.dtype || w.rows != first.rows || w.cols != first.cols) {
      fail("the GPU backend needs a layer's experts to share their type and shape ({} {}x{} and {} {}x{})",
           dtype_name(first.dtype), first.rows, first.cols, dtype_name(w.dtype), w.rows, w.cols);
    }
  }
  const std::size_t stride = (first.bytes() + kAlign - 1) / kAlign * kAlign;
  DeviceBuffer<std::uint8_t>& stacked = matrices_.emplace_back(stride * experts.size());
  for (std::size_t e = 0; e < experts.size(); ++e) {
    upload_weights(experts[e], stacked.data() + e * stride);
    uploaded(experts[e]);
  }
  return {{first.dtype, first.rows, first.cols, stacked.data()}, stride};
}

const float* GpuWeights::upload(const std::vector<float>& host) {
  vectors_.emplace_back(host);
  return vectors_.back().data();
}

}  // namespace rf::llama
