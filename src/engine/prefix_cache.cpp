#include "engine/prefix_cache.h"

namespace rf {

namespace {
// splitmix64's finalizer: every input bit reaches every output bit.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

std::uint64_t prefix_block_key(std::uint64_t previous_key, std::span<const std::int32_t> block_tokens) {
  std::uint64_t key = mix(previous_key + 0x9e3779b97f4a7c15ULL);
  for (auto token : block_tokens) key = mix(key ^ static_cast<std::uint32_t>(token));
  return key;
}

std::size_t PrefixChain::adopt_cached(BlockAllocator& blocks, std::span<const std::int32_t> tokens, int block_size,
                                      std::size_t max_blocks, std::vector<std::int32_t>& table) {
  while (table.size() < max_blocks && (table.size() + 1) * block_size <= tokens.size()) {
    const std::uint64_t key = prefix_block_key(last_key_, tokens.subspan(table.size() * block_size, block_size));
    const auto block = blocks.find(key);
    if (!block) break;
    table.push_back(*block);
    last_key_ = key;
  }
  published_ = table.size();
  return table.size() * block_size;
}

void PrefixChain::publish_full(BlockAllocator& blocks, std::span<const std::int32_t> tokens, std::size_t computed,
                               int block_size, const std::vector<std::int32_t>& table) {
  for (; (published_ + 1) * block_size <= computed; ++published_) {
    last_key_ = prefix_block_key(last_key_, tokens.subspan(published_ * block_size, block_size));
    blocks.publish(table[published_], last_key_);
  }
}

}  // namespace rf
