#pragma once
// Hands out the KV cache's fixed-size blocks. Sequences own the blocks in their block table
// and return them when they finish; running out is reported, never a crash.
#include <cstdint>
#include <optional>
#include <vector>

namespace rf {

class BlockAllocator {
 public:
  explicit BlockAllocator(int n_blocks);

  std::optional<std::int32_t> allocate();
  void release(std::int32_t block);
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int total_blocks() const { return total_; }

  // Grows `table` until it covers `positions` positions; false (table unchanged) if there are not enough free blocks.
  bool reserve(std::vector<std::int32_t>& table, int positions, int block_size);
  void release_all(std::vector<std::int32_t>& table);

 private:
  int total_;
  std::vector<std::int32_t> free_;
};

}  // namespace rf
