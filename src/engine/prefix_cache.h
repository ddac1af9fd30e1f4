#pragma once
// Prefix caching: a sequence's full KV blocks are published in the BlockAllocator under a key
// that hashes the block's tokens together with the previous block's key, so one key names a
// whole prefix. A later sequence starting with the same tokens (a shared system prompt, an
// earlier turn of the conversation) takes those blocks instead of computing them again.
// Keys are 64-bit hashes: a collision, astronomically unlikely, would reuse the wrong block.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_allocator.h"

namespace rf {

std::uint64_t prefix_block_key(std::uint64_t previous_key, std::span<const std::int32_t> block_tokens);

// One sequence's progress through the cache: which of its leading blocks are published.
class PrefixChain {
 public:
  // Puts the cached blocks of the longest cached prefix of `tokens` (whole blocks, at most
  // max_blocks) into the empty `table`, taking a reference on each; returns the tokens they hold.
  std::size_t adopt_cached(BlockAllocator& blocks, std::span<const std::int32_t> tokens, int block_size,
                           std::size_t max_blocks, std::vector<std::int32_t>& table);
  // Publishes the blocks of `table` that the first `computed` tokens fill.
  void publish_full(BlockAllocator& blocks, std::span<const std::int32_t> tokens, std::size_t computed, int block_size,
                    const std::vector<std::int32_t>& table);
  // The sequence gave its blocks back (preempted): nothing of it is published any more.
  void reset() { *this = PrefixChain{}; }

 private:
  std::size_t published_ = 0;
  std::uint64_t last_key_ = 0;
};

}  // namespace rf
