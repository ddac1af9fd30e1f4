#pragma once
// The Llama-family decoder (Llama 2/3, Mistral, Qwen2, Qwen3) on the CPU: one forward step over
// a Batch, reading and appending the paged KV cache, returning logits for the requested rows.
#include <vector>

#include "backend/cpu/kv_cache.h"
#include "model/batch.h"
#include "model/checkpoint.h"

namespace rf {
class ThreadPool;
}

namespace rf::cpu {

class LlamaForward {
 public:
  // The weights must outlive this object.
  LlamaForward(const ModelConfig& config, const LlamaWeights& weights, ThreadPool& pool);

  const ModelConfig& config() const { return config_; }

  // logits: batch.logit_rows.size() rows of vocab_size values.
  void forward(const Batch& batch, KvCache& cache, std::vector<float>& logits);

 private:
  void attention(const Batch& batch, KvCache& cache, int layer);

  const ModelConfig& config_;
  const LlamaWeights& weights_;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;
  // Activations of the current batch, [tokens][width].
  std::vector<float> x_, normed_, q_, k_, v_, attn_, proj_, gate_, up_;
};

}  // namespace rf::cpu
