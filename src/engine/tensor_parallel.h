#pragma once
// One model over several ranks (--tensor-parallel N): each rank a backend's forward pass over its
// shard (models/llama/tensor_split.h) on a thread of its own (util/rank_threads.h), every call run
// on every rank at once with the same batch. Each rank's KV cache holds its heads of the same
// blocks, so the engine's block tables (the scheduler's, the prefix cache's) stay one.
//
// After each all-reduce the ranks hold the same hidden states, bit for bit, so the same logits:
// where the ranks sample on their devices, each samples every row with the same draw (taken once
// from the row's sampler, as one device would), rank 0's tokens are returned and the others' are
// checked against them. Where they do not (the CPU), rank 0's logits are sampled on the host.
#include <functional>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/forward_pass.h"
#include "models/llama/tensor_split.h"
#include "models/llama/weights.h"
#include "util/rank_threads.h"

namespace rf {

class TensorParallelForward : public ForwardPass {
 public:
  // A rank's forward pass over its part of the model, made on the rank's thread.
  using MakeRank = std::function<std::unique_ptr<ForwardPass>(int rank, const ModelConfig& config,
                                                              const LlamaWeights& weights)>;
  struct Backend {
    MakeRank make;
    bool copies_weights = false;     // the pass copies its weights (a GPU's): each shard goes once uploaded
    bool samples_on_device = false;  // the passes sample (queue_sample) without host logits
    std::function<void()> abort;     // releases ranks waiting in a collective: called when one fails
  };

  // Fails (rf::Error) where the model does not split over `world` ranks (llama::check_split). The
  // backend is kept for this object's life, with what its functions hold (the CPU ranks' pools).
  TensorParallelForward(const ModelConfig& config, const LlamaWeights& weights, int world, Backend backend);
  ~TensorParallelForward() override;

  void forward(const Batch& batch, std::vector<float>& logits) override;
  void hidden_states(const Batch& batch, std::vector<float>& states) override;
  std::vector<std::int32_t> sample(const Batch& batch, std::span<const SampleRow> rows) override;
  void queue_sample(const Batch& batch, std::span<const SampleRow> rows) override;
  std::vector<std::int32_t> take_tokens() override;
  int kv_blocks() const override;
  std::size_t kv_cache_bytes() const override;  // all ranks'
  std::string device_name() const override;
  DeviceCeilings measure_ceilings() override;  // rank 0's device

  int ranks() const override { return static_cast<int>(passes_.size()); }

 private:
  // Runs fn(rank) on every rank; once one has failed, every later call fails at once.
  void run(const std::function<void(int rank)>& fn);

  Backend backend_;
  std::vector<ModelConfig> configs_;  // each rank's, which its pass refers to
  std::vector<std::unique_ptr<llama::WeightShard>> shards_;  // kept where the passes refer to them
  std::vector<std::unique_ptr<ForwardPass>> passes_;
  std::vector<std::vector<float>> rank_outputs_;  // ranks 1 and up's logits or states, never read
  RankThreads threads_;
  bool broken_ = false;
};

}  // namespace rf
