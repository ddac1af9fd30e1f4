#pragma once
// A model's weights copied to the device once (host code only): matrices in their stored types (laid
// out as device_layout.h says), seen through the same WeightMatrix views as on the host but with data
// in device memory; norms, biases and the RoPE frequencies in fp32. Tied output weights share the
// embedding's copy.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/gpu/runtime/device_buffer.h"
#include "model/config.h"
#include "models/llama/weights.h"
#include "util/progress_meter.h"

namespace rf::llama {

// A sparse layer's experts' matrices of one kind (gate, up or down), stacked in one allocation: expert
// e's is `matrix` with data + e * stride (the expert GEMV's ExpertProducts::stride).
struct StackedExperts {
  WeightMatrix matrix{};  // expert 0's
  std::size_t stride = 0;

  WeightMatrix expert(int e) const {
    WeightMatrix m = matrix;
    m.data = static_cast<const std::uint8_t*>(m.data) + static_cast<std::size_t>(e) * stride;
    return m;
  }
};

struct GpuLayer {
  const float* attn_norm;
  WeightMatrix wq, wk, wv, wo;
  const float* bq;  // Qwen2, else null
  const float* bk;
  const float* bv;
  const float* q_norm;  // Qwen3, else null
  const float* k_norm;
  const float* post_attn_norm;  // Gemma, else null
  const float* ffn_norm;
  WeightMatrix w_gate, w_up, w_down;  // a dense layer's
  const float* post_ffn_norm;  // Gemma, else null
  // A sparse layer's (ModelConfig::is_moe; else null data): the router and the experts.
  WeightMatrix router{};
  StackedExperts experts_gate, experts_up, experts_down;
  // wq, wk and wv as one matrix (their rows in that order, in one allocation) where they share a type
  // and column count: a batch's q, k and v then come from one GEMM. Else null data. The same for
  // w_gate and w_up.
  WeightMatrix wqkv{};
  WeightMatrix w_gate_up{};
};

class GpuWeights {
  // First: the views below point into these, and are initialised in order.
  std::vector<gpu::DeviceBuffer<std::uint8_t>> matrices_;
  std::vector<gpu::DeviceBuffer<float>> vectors_;
  ProgressFn progress_;
  std::uint64_t uploaded_ = 0, total_ = 0;  // matrices' bytes, for progress_

 public:
  // `context`, the longest sequence served, picks LongRoPE's factors (rope_inv_freq). `progress`
  // is told the matrices' bytes as they go up.
  GpuWeights(const ModelConfig& config, const LlamaWeights& host, int context, ProgressFn progress = {});

  WeightMatrix token_embedding;
  std::vector<GpuLayer> layers;
  const float* output_norm;
  WeightMatrix output;
  const float* inv_freq;  // RoPE: head_dim / 2 values, scaling applied (rope_inv_freq in model/config.h)
  // The sliding-window layers' (rope_inv_freq_local: Gemma 3's local base); inv_freq where the model
  // has no base of their own.
  const float* inv_freq_local;
  // LongRoPE's attention factor f multiplies cos and sin, so every score by f^2 (the GPU rotates the
  // whole head): attention's scale carries it, the kernels rotate as without it.
  float rope_scale_squared;

 private:
  WeightMatrix upload(const WeightMatrix& host);
  // Uploads `parts` stacked by rows into one allocation where they share a type and column count
  // (and each ends on a 256-byte boundary, so that every part stays as aligned as on its own), and
  // returns the whole; else uploads each alone and returns a matrix with null data. Either way
  // views[i] is parts[i]'s copy.
  WeightMatrix upload_stacked(std::span<const WeightMatrix> parts, std::span<WeightMatrix> views);
  // Every expert's matrix (one type and shape) in one allocation, each on a 256-byte boundary.
  StackedExperts upload_experts(const std::vector<WeightMatrix>& experts);
  const float* upload(const std::vector<float>& host);
  void uploaded(const WeightMatrix& host);
  const float* upload(const std::optional<std::vector<float>>& host) { return host ? upload(*host) : nullptr; }
};

}  // namespace rf::llama
