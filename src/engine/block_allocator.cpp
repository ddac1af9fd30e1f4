#include "engine/block_allocator.h"

namespace rf {

BlockAllocator::BlockAllocator(int n_blocks) : total_(n_blocks) {
  // Hand out low-numbered blocks first; the order is otherwise irrelevant.
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<std::int32_t> BlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const std::int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void BlockAllocator::release(std::int32_t block) { free_.push_back(block); }

bool BlockAllocator::reserve(std::vector<std::int32_t>& table, int positions, int block_size) {
  const std::size_t needed = (static_cast<std::size_t>(positions) + block_size - 1) / block_size;
  if (needed <= table.size()) return true;
  if (needed - table.size() > free_.size()) return false;
  while (table.size() < needed) table.push_back(*allocate());
  return true;
}

void BlockAllocator::release_all(std::vector<std::int32_t>& table) {
  for (auto b : table) release(b);
  table.clear();
}

}  // namespace rf
