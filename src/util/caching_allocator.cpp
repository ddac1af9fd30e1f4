#include "util/caching_allocator.h"

#include <algorithm>
#include <iterator>

#include "util/error.h"

namespace rf {

namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1u << 20); }

}  // namespace

CachingAllocator::~CachingAllocator() {
  for (const auto& [base, bytes] : segments_) source_.release(reinterpret_cast<void*>(base));
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_up(std::max<std::size_t>(bytes, 1), kAlignment);
  auto fit = free_.lower_bound({size, 0});
  if (fit == free_.end()) {
    add_segment(size);
    fit = free_.lower_bound({size, 0});
  }
  const std::uintptr_t address = fit->second;
  free_.erase(fit);
  Block& block = blocks_.at(address);
  if (block.size > size) {  // the rest stays free (both are multiples of kAlignment)
    blocks_.emplace(address + size, Block{block.segment, block.size - size, true});
    free_.emplace(block.size - size, address + size);
    block.size = size;
  }
  block.free = false;
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  return reinterpret_cast<void*>(address);
}

void CachingAllocator::free(void* p) {
  const auto block = blocks_.find(reinterpret_cast<std::uintptr_t>(p));
  if (block == blocks_.end() || block->second.free) fail("CachingAllocator: freeing {} that is not in use", p);
  in_use_ -= block->second.size;
  mark_free(block);
}

void CachingAllocator::release_free_segments() {
  bool waited = false;
  for (auto segment = segments_.begin(); segment != segments_.end();) {
    const auto [base, bytes] = *segment;
    const Block& block = blocks_.at(base);
    if (!block.free || block.size != bytes) {
      ++segment;
      continue;
    }
    if (!std::exchange(waited, true)) source_.wait_for_users();
    free_.erase({bytes, base});
    blocks_.erase(base);
    source_.release(reinterpret_cast<void*>(base));
    held_ -= bytes;
    segment = segments_.erase(segment);
  }
}

void CachingAllocator::add_segment(std::size_t request) {
  const std::size_t bytes = request < kLargeRequest ? kSmallSegment : round_up(request, kSegmentGranule);
  void* p = source_.allocate(bytes);
  if (!p) {
    release_free_segments();
    p = source_.allocate(bytes);
  }
  if (!p) {
    fail("out of device memory (or at the --gpu-memory bound): {:.1f} MiB more were needed, with {:.1f} MiB in use "
         "and {:.1f} MiB held",
         mib(bytes), mib(in_use_), mib(held_));
  }
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  segments_.emplace(base, bytes);
  blocks_.emplace(base, Block{base, bytes, true});
  free_.emplace(bytes, base);
  held_ += bytes;
  peak_held_ = std::max(peak_held_, held_);
}

// Frees `block`, merged with a free neighbour on either side in its segment.
void CachingAllocator::mark_free(Blocks::iterator block) {
  block->second.free = true;
  free_.emplace(block->second.size, block->first);
  const auto mergeable = [](Blocks::iterator first, Blocks::iterator second) {
    return first->second.free && second->second.free && first->second.segment == second->second.segment;
  };
  if (const auto next = std::next(block); next != blocks_.end() && mergeable(block, next)) merge(block, next);
  if (block != blocks_.begin()) {
    if (const auto previous = std::prev(block); mergeable(previous, block)) merge(previous, block);
  }
}

// Two free blocks, `second` right after `first`, become `first`.
void CachingAllocator::merge(Blocks::iterator first, Blocks::iterator second) {
  free_.erase({first->second.size, first->first});
  free_.erase({second->second.size, second->first});
  first->second.size += second->second.size;
  blocks_.erase(second);
  free_.emplace(first->second.size, first->first);
}

}  // namespace rf
