#pragma once
// The Llama-family decoder (Llama 2/3, Mistral, Qwen2, Qwen3, Gemma 2/3, Phi-3/4-mini) on the CPU: one forward
// step over a Batch, reading and appending the paged KV cache, returning logits for the requested
// rows. Sliding-window layers attend to the window's keys only. A sparse layer (Mixtral, Qwen3-MoE)
// routes each token to its experts and runs every expert once over the tokens routed to it.
#include <functional>
#include <span>
#include <vector>

#include "backend/cpu/kv_cache.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/forward_pass.h"
#include "models/llama/moe.h"
#include "models/llama/weights.h"

namespace rf {
class ThreadPool;
}

namespace rf::llama {

class CpuForward : public ForwardPass {
 public:
  // The weights and the pool must outlive this object; the cache holds kv_blocks blocks of block_size positions.
  // max_context, the longest sequence served (0: the cache's positions), picks LongRoPE's factors.
  CpuForward(const ModelConfig& config, const LlamaWeights& weights, ThreadPool& pool, int block_size, int kv_blocks,
             int max_context = 0);

  // A rank of a tensor-parallel group (models/llama/tensor_split.h) runs its shard and hands o's and
  // down's partial outputs (tokens * hidden values) to `sum`, which leaves the sum over the ranks.
  using RankSum = std::function<void(std::span<float>)>;
  void set_rank_sum(RankSum sum) { rank_sum_ = std::move(sum); }

  void forward(const Batch& batch, std::vector<float>& logits) override;
  void hidden_states(const Batch& batch, std::vector<float>& states) override;
  int kv_blocks() const override { return cache_.n_blocks(); }
  std::size_t kv_cache_bytes() const override { return cache_.bytes(); }
  std::string device_name() const override;
  DeviceCeilings measure_ceilings() override;

 private:
  template <typename Fn>
  void per_token(std::size_t n, Fn fn);
  void run_layers(const Batch& batch);  // embeds the batch and runs every layer into x_
  void final_norm(const Batch& batch);  // the logit rows of x_ through the output norm, into normed_
  void embed(const Batch& batch);
  void attention_block(const Batch& batch, int layer);
  void attention(const Batch& batch, int layer);
  void mlp_block(const Batch& batch, int layer);
  void gated_mlp(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                 std::size_t rows, std::size_t ffn, float* out);
  void dense_mlp(const LayerWeights& w, std::size_t n);
  void sparse_mlp(const LayerWeights& w, std::size_t n);
  void output(const Batch& batch, std::vector<float>& logits);
  // The ranks' sum of proj_'s first n tokens (a tensor-parallel rank's), else nothing.
  void sum_over_ranks(std::size_t n);

  const ModelConfig& config_;
  const LlamaWeights& weights_;
  ThreadPool& pool_;
  cpu::KvCache cache_;
  std::vector<float> inv_freq_;
  std::vector<float> inv_freq_local_;  // the sliding-window layers' (Gemma 3's own base), else inv_freq_
  float rope_scale_;                   // what RoPE multiplies cos and sin by (LongRoPE's attention factor)
  // Activations of the current batch, [tokens][width].
  std::vector<float> x_, normed_, q_, k_, v_, attn_, proj_, gate_, up_;
  // A sparse layer's: router logits [tokens][experts], each token's choices, the tokens grouped by
  // expert, and one expert's gathered inputs and outputs [its tokens][hidden].
  std::vector<float> router_logits_, expert_in_, expert_out_;
  std::vector<ExpertChoice> choices_;
  ExpertGroups groups_;
  RankSum rank_sum_;
};

}  // namespace rf::llama
