#include "engine/block_allocator.h"

#include "util/error.h"

namespace rf {

BlockAllocator::BlockAllocator(int n_blocks) : refs_(n_blocks, 0), key_of_(n_blocks), evictable_at_(n_blocks) {
  // Hand out low-numbered blocks first; the order is otherwise irrelevant.
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<std::int32_t> BlockAllocator::allocate() {
  std::int32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    block = evictable_.front();
    evictable_.pop_front();
    cached_.erase(*key_of_[block]);
    key_of_[block].reset();
  } else {
    return std::nullopt;
  }
  refs_[block] = 1;
  return block;
}

void BlockAllocator::release(std::int32_t block) {
  if (refs_.at(block) <= 0) fail("KV block {} released more often than it was taken", block);
  if (--refs_[block] > 0) return;
  if (key_of_[block]) {
    evictable_at_[block] = evictable_.insert(evictable_.end(), block);
  } else {
    free_.push_back(block);
  }
}

bool BlockAllocator::reserve(std::vector<std::int32_t>& table, int positions, int block_size) {
  const std::size_t needed = (static_cast<std::size_t>(positions) + block_size - 1) / block_size;
  if (needed <= table.size()) return true;
  if (needed - table.size() > static_cast<std::size_t>(free_blocks())) return false;
  while (table.size() < needed) table.push_back(*allocate());
  return true;
}

void BlockAllocator::release_all(std::vector<std::int32_t>& table) {
  for (auto b : table) release(b);
  table.clear();
}

void BlockAllocator::publish(std::int32_t block, std::uint64_t key) {
  if (refs_.at(block) <= 0) fail("KV block {} published without a reference", block);
  if (key_of_[block] || cached_.contains(key)) return;
  cached_.emplace(key, block);
  key_of_[block] = key;
}

std::optional<std::int32_t> BlockAllocator::find(std::uint64_t key) {
  const auto it = cached_.find(key);
  if (it == cached_.end()) return std::nullopt;
  const std::int32_t block = it->second;
  if (refs_[block]++ == 0) evictable_.erase(evictable_at_[block]);
  return block;
}

}  // namespace rf
