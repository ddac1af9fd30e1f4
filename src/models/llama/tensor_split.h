#pragma once
// Tensor parallelism's split of a Llama-family model over `world` ranks (Megatron-LM's): each rank
// keeps a group of attention heads (q, k and v by rows, o by the matching columns) and a slice of the
// MLP (gate and up by rows, down by the matching columns; every expert alike), so that each rank's o
// and down give a partial sum of the hidden state. The ranks add those up (an all-reduce) before the
// residual add; everything else (norms, router, embedding, output head) is whole on every rank and
// runs on the same bits there. Where there are fewer KV heads than ranks, each KV head is kept by
// world / n_kv_heads ranks, as vLLM replicates them.
//
// Host code for any backend: the GPU's tensor-parallel forward uploads each rank's shard; the CPU
// decoder runs shards in the tests, as the split's reference.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "models/llama/weights.h"

namespace rf::llama {

// Throws rf::Error, naming the count that does not divide and what would, unless `world` ranks can
// split the model: attention heads and KV heads (or the ranks by the KV heads), the MLP's width
// (each expert's), and o's and down's columns on whole quant blocks of their stored types.
void check_split(const ModelConfig& config, const LlamaWeights& weights, int world);

// The model rank `rank` of `world` runs: its heads, KV heads and MLP width.
ModelConfig rank_config(const ModelConfig& config, int rank, int world);

// The bytes of matrices each rank holds: its share of the layers' (its KV heads' whole, where they are
// replicated) and the whole embedding and output head; the routers, negligible, counted as shared.
std::size_t rank_matrix_bytes(const ModelConfig& config, const LlamaWeights& whole, int world);

// One rank's weights. Row slices are views into the whole model's memory, which must outlive the
// shard; column slices are copies, held by the shard (a backend that uploads them may drop it then).
class WeightShard {
 public:
  // `config` is the whole model's; check_split(config, whole, world) must have passed.
  WeightShard(const ModelConfig& config, const LlamaWeights& whole, int rank, int world);
  WeightShard(const WeightShard&) = delete;
  WeightShard& operator=(const WeightShard&) = delete;

  const LlamaWeights& weights() const { return weights_; }

 private:
  // Columns [first, first + count) of every row of m, copied.
  WeightMatrix columns(const WeightMatrix& m, std::size_t first, std::size_t count);

  std::vector<std::vector<std::uint8_t>> copies_;
  LlamaWeights weights_;
};

}  // namespace rf::llama
