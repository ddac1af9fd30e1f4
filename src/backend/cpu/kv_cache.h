#pragma once
// The CPU backend's paged key/value cache: fp32 rows of kv_dim values, one row per cached
// position, grouped in blocks of block_size positions. Which block holds which positions of a
// sequence is the engine's business (a block table per sequence, see model/batch.h).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rf::cpu {

// The cache slot (block * block_size + offset) of position `pos` of a sequence.
inline std::size_t cache_slot(const std::vector<std::int32_t>& block_table, int pos, int block_size) {
  return static_cast<std::size_t>(block_table[pos / block_size]) * block_size + pos % block_size;
}

class KvCache {
 public:
  KvCache(int n_layers, int kv_dim, int block_size, int n_blocks)
      : kv_dim_(kv_dim), block_size_(block_size), n_blocks_(n_blocks),
        keys_(static_cast<std::size_t>(n_layers), std::vector<float>(static_cast<std::size_t>(n_blocks) * block_size * kv_dim)),
        values_(keys_) {}

  int block_size() const { return block_size_; }
  int n_blocks() const { return n_blocks_; }
  std::size_t bytes() const { return 2 * keys_.size() * keys_[0].size() * sizeof(float); }

  // Row of the cache slot `slot` (= block * block_size + offset) in `layer`.
  float* key(int layer, std::size_t slot) { return keys_[layer].data() + slot * kv_dim_; }
  float* value(int layer, std::size_t slot) { return values_[layer].data() + slot * kv_dim_; }

 private:
  int kv_dim_;
  int block_size_;
  int n_blocks_;
  std::vector<std::vector<float>> keys_;
  std::vector<std::vector<float>> values_;
};

}  // namespace rf::cpu
