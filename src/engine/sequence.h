#pragma once
// A sequence's claim on the KV cache: its block table, returned to the allocator when the
// sequence ends, however it ends.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_allocator.h"
#include "model/batch.h"
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

// Which tokens of a sequence ask for logits: its last one, or every one.
enum class ChunkLogits { Last, All };

// A sequence's tokens from position 0, in batches of at most max_tokens (a prompt longer than a step
// takes), each with the blocks it needs reserved first: on_chunk(batch, begin, count) for tokens
// [begin, begin + count), in order.
template <class OnChunk>
void for_each_chunk(std::span<const std::int32_t> tokens, int max_tokens, SequenceBlocks& blocks, ChunkLogits logits,
                    OnChunk&& on_chunk) {
  for (std::size_t begin = 0; begin < tokens.size(); begin += max_tokens) {
    const std::size_t count = std::min<std::size_t>(max_tokens, tokens.size() - begin);
    const bool last = begin + count == tokens.size();
    blocks.reserve(static_cast<int>(begin + count));
    Batch batch;
    batch.block_tables.push_back(blocks.table());
    batch.add_sequence(0, tokens.data() + begin, count, static_cast<int>(begin), last && logits == ChunkLogits::Last,
                       logits == ChunkLogits::All);
    on_chunk(batch, begin, count);
  }
}

}  // namespace rf
