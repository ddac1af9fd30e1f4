#include "backend/gpu/device_weights.h"

#include "backend/gpu/device_layout.h"

namespace rf::gpu {

DeviceWeights::DeviceWeights(const ModelConfig& config, const LlamaWeights& host)
    : token_embedding(upload(host.token_embedding)),
      output_norm(upload(host.output_norm)),
      output(host.output.data == host.token_embedding.data ? token_embedding : upload(host.output)),
      inv_freq(upload(rf::rope_inv_freq(config, host.rope_freq_factors ? &*host.rope_freq_factors : nullptr))) {
  for (const LayerWeights& l : host.layers) {
    layers.push_back({upload(l.attn_norm), upload(l.wq), upload(l.wk), upload(l.wv), upload(l.wo), upload(l.bq),
                      upload(l.bk), upload(l.bv), upload(l.q_norm), upload(l.k_norm), upload(l.ffn_norm),
                      upload(l.w_gate), upload(l.w_up), upload(l.w_down)});
  }
}

WeightMatrix DeviceWeights::upload(const WeightMatrix& host) {
  matrices_.push_back(upload_weights(host));
  return {host.dtype, host.rows, host.cols, matrices_.back().data()};
}

const float* DeviceWeights::upload(const std::vector<float>& host) {
  vectors_.emplace_back(host);
  return vectors_.back().data();
}

}  // namespace rf::gpu
