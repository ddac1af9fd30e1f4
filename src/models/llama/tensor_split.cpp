#include "models/llama/tensor_split.h"

#include <cstring>

#include "util/error.h"

namespace rf::llama {

namespace {

// A rank's share of `total` things, `world` ranks sharing them evenly.
struct Part {
  std::size_t first;
  std::size_t count;
};

Part part(std::size_t total, int rank, int world) {
  const std::size_t count = total / world;
  return {count * rank, count};
}

// The KV heads rank `rank` keeps: its share, or where the ranks outnumber them, the one its query
// heads read (world / n_kv_heads ranks keep each).
Part kv_heads(const ModelConfig& c, int rank, int world) {
  if (c.n_kv_heads >= world) return part(c.n_kv_heads, rank, world);
  return {static_cast<std::size_t>(rank) * c.n_kv_heads / world, 1};
}

WeightMatrix rows(const WeightMatrix& m, Part p) {
  WeightMatrix r = m;
  r.rows = p.count;
  r.data = static_cast<const std::uint8_t*>(m.data) + p.first * row_bytes(m.dtype, m.cols);
  return r;
}

Vector slice(const Vector& v, Part p) { return {v.begin() + p.first, v.begin() + p.first + p.count}; }

Part times(Part p, int width) { return {p.first * width, p.count * width}; }

// Fails unless `count` things divide among `world` ranks.
void require_divides(int count, const char* what, int world) {
  if (count % world != 0) {
    fail("tensor parallelism over {} GPUs: the model's {} ({}) do not divide by {}; use a number of GPUs that "
         "divides {}",
         world, what, count, world, count);
  }
}

// Fails unless each rank's columns of m start and end on whole quant blocks.
void require_whole_blocks(const WeightMatrix& m, const char* name, int layer, int world) {
  const std::size_t block = dtype_info(m.dtype).block_elems;
  const std::size_t per_rank = m.cols / world;
  if (per_rank % block != 0) {
    fail("tensor parallelism over {} GPUs: layer {}'s {} ({}, blocks of {} values) would split into {} columns per "
         "GPU, not whole blocks; use fewer GPUs or a model stored in another type",
         world, layer, name, dtype_name(m.dtype), block, per_rank);
  }
}

}  // namespace

void check_split(const ModelConfig& c, const LlamaWeights& weights, int world) {
  if (world < 1) fail("tensor parallelism needs at least 1 GPU, got {}", world);
  require_divides(c.n_heads, "attention heads", world);
  if (c.n_kv_heads < world && world % c.n_kv_heads != 0) {
    fail("tensor parallelism over {} GPUs: the model's {} KV heads neither divide by {} nor divide it", world,
         c.n_kv_heads, world);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights.layers[l];
    require_whole_blocks(w.wo, "attention output (o)", l, world);
    if (c.is_moe(l)) {
      require_divides(c.expert_ffn, "experts' MLP width", world);
      for (const WeightMatrix& down : w.expert_down) require_whole_blocks(down, "expert down projection", l, world);
    } else {
      require_divides(c.intermediate_size, "MLP width (intermediate size)", world);
      require_whole_blocks(w.w_down, "MLP down projection", l, world);
    }
  }
}

std::size_t rank_matrix_bytes(const ModelConfig& c, const LlamaWeights& whole, int world) {
  const std::size_t replicated =
      whole.token_embedding.bytes() + (c.tie_word_embeddings ? 0 : whole.output.bytes());
  std::size_t kv = 0;
  for (const LayerWeights& w : whole.layers) kv += w.wk.bytes() + w.wv.bytes();
  const std::size_t split = matrix_bytes(whole, c) - replicated - kv;
  return split / world + kv / c.n_kv_heads * kv_heads(c, 0, world).count + replicated;
}

ModelConfig rank_config(const ModelConfig& config, int rank, int world) {
  ModelConfig c = config;
  c.n_heads = config.n_heads / world;
  c.n_kv_heads = static_cast<int>(kv_heads(config, rank, world).count);
  c.intermediate_size = config.intermediate_size / world;
  c.expert_ffn = config.expert_ffn / world;
  return c;
}

WeightShard::WeightShard(const ModelConfig& c, const LlamaWeights& whole, int rank, int world) : weights_(whole) {
  const Part q = times(part(c.n_heads, rank, world), c.head_dim);
  const Part kv = times(kv_heads(c, rank, world), c.head_dim);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& w = weights_.layers[l];
    w.wq = rows(w.wq, q);
    w.wk = rows(w.wk, kv);
    w.wv = rows(w.wv, kv);
    w.wo = columns(w.wo, q.first, q.count);
    if (w.bq) w.bq = slice(*w.bq, q);
    if (w.bk) w.bk = slice(*w.bk, kv);
    if (w.bv) w.bv = slice(*w.bv, kv);
    if (c.is_moe(l)) {
      const Part ffn = part(c.expert_ffn, rank, world);
      for (std::size_t e = 0; e < w.expert_gate.size(); ++e) {
        w.expert_gate[e] = rows(w.expert_gate[e], ffn);
        w.expert_up[e] = rows(w.expert_up[e], ffn);
        w.expert_down[e] = columns(w.expert_down[e], ffn.first, ffn.count);
      }
    } else {
      const Part ffn = part(c.intermediate_size, rank, world);
      w.w_gate = rows(w.w_gate, ffn);
      w.w_up = rows(w.w_up, ffn);
      w.w_down = columns(w.w_down, ffn.first, ffn.count);
    }
  }
}

WeightMatrix WeightShard::columns(const WeightMatrix& m, std::size_t first, std::size_t count) {
  const std::size_t whole_row = row_bytes(m.dtype, m.cols), row = row_bytes(m.dtype, count);
  const std::size_t offset = row_bytes(m.dtype, first);
  std::vector<std::uint8_t>& copy = copies_.emplace_back(m.rows * row);
  const auto* from = static_cast<const std::uint8_t*>(m.data);
  for (std::size_t r = 0; r < m.rows; ++r) std::memcpy(copy.data() + r * row, from + r * whole_row + offset, row);
  return {m.dtype, m.rows, count, copy.data()};
}

}  // namespace rf::llama
