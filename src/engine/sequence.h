#pragma once
// A sequence's claim on the KV cache: its block table, returned to the allocator when the
// sequence ends, however it ends.
#include <cstdint>
#include <vector>

#include "engine/block_allocator.h"
#include "util/error.h"

namespace rf {

class SequenceBlocks {
 public:
  SequenceBlocks(BlockAllocator& allocator, int block_size) : allocator_(allocator), block_size_(block_size) {}
  ~SequenceBlocks() { allocator_.release_all(table_); }
  SequenceBlocks(const SequenceBlocks&) = delete;
  SequenceBlocks& operator=(const SequenceBlocks&) = delete;

  // Makes room for `positions` positions; throws if the cache is full.
  void reserve(int positions) {
    if (!allocator_.reserve(table_, positions, block_size_)) {
      fail("the KV cache is full: {} positions do not fit (raise --ctx-size)", positions);
    }
  }
  const std::vector<std::int32_t>& table() const { return table_; }

 private:
  BlockAllocator& allocator_;
  int block_size_;
  std::vector<std::int32_t> table_;
};

}  // namespace rf
