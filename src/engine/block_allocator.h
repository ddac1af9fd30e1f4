#pragma once
// Hands out the KV cache's fixed-size blocks. Blocks are reference-counted so that sequences
// sharing a prompt prefix share its blocks: a full block can be published under a key naming
// its content (see prefix_cache.h), and once nobody references it, it stays cached until
// allocate() needs the room, least recently used first. Running out is reported, never a crash.
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace rf {

class BlockAllocator {
 public:
  explicit BlockAllocator(int n_blocks);

  // A block with one reference: a never-used or released one, else the least recently used cached one.
  std::optional<std::int32_t> allocate();
  void release(std::int32_t block);  // drops one reference
  // Blocks allocate() can hand out: unreferenced ones, cached or not.
  int free_blocks() const { return static_cast<int>(free_.size() + evictable_.size()); }
  int total_blocks() const { return static_cast<int>(refs_.size()); }
  int cached_blocks() const { return static_cast<int>(cached_.size()); }  // published, referenced or not

  // Grows `table` until it covers `positions` positions; false (table unchanged) if there are not enough free blocks.
  bool reserve(std::vector<std::int32_t>& table, int positions, int block_size);
  void release_all(std::vector<std::int32_t>& table);

  // Makes a referenced, full block findable under `key`; a key already cached keeps its block.
  void publish(std::int32_t block, std::uint64_t key);
  // The block cached under `key`, with a reference taken for the caller.
  std::optional<std::int32_t> find(std::uint64_t key);

 private:
  std::vector<int> refs_;
  std::vector<std::optional<std::uint64_t>> key_of_;
  std::vector<std::int32_t> free_;
  std::unordered_map<std::uint64_t, std::int32_t> cached_;
  std::list<std::int32_t> evictable_;  // cached blocks without references, least recently used first
  std::vector<std::list<std::int32_t>::iterator> evictable_at_;
};

}  // namespace rf
