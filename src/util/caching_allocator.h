#pragma once
// Memory for short-lived tensors, cut from a few large segments and handed out again once freed.
//
// A Stable Diffusion step allocates and frees hundreds of activations of some dozens of sizes. Asking
// the device for each would synchronise it; keeping freed blocks by exact size (this allocator's
// predecessor) held every size's own peak at once, far more than is ever in use. Here a request takes
// the smallest free block that fits, split where it is larger, and freed neighbours merge again, so
// what is held stays near what is in use at the peak (the scheme of PyTorch's CUDA caching
// allocator). It knows memory only as addresses from its Source, so the policy is tested on the host.
//
// Not thread-safe: one owner, one GPU stream, so memory freed by one operation may serve the next.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace rf {

class CachingAllocator {
 public:
  struct Source {
    std::function<void*(std::size_t bytes)> allocate;  // nullptr when there is no room
    std::function<void(void* segment)> release;
    std::function<void()> wait_for_users;  // before releasing: queued work may still read a free block
  };
  static constexpr std::size_t kAlignment = 512;              // of every block
  static constexpr std::size_t kSmallSegment = 2u << 20;      // shared by requests below kLargeRequest
  static constexpr std::size_t kLargeRequest = 1u << 20;      // and larger ones get a segment of their own
  static constexpr std::size_t kSegmentGranule = 2u << 20;    // that large segments are rounded up to

  explicit CachingAllocator(Source source) : source_(std::move(source)) {}
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();  // releases every segment

  // At least `bytes` (kAlignment-aligned where the source's segments are). Where the source has no
  // room, releases the wholly free segments and asks again; fails (rf::Error) if it still has none.
  void* allocate(std::size_t bytes);
  // Fails on an address allocate() did not return or that is already free.
  void free(void* p);
  // Gives the source back every segment none of whose memory is in use.
  void release_free_segments();

  std::size_t held() const { return held_; }            // bytes of segments
  std::size_t peak_held() const { return peak_held_; }
  std::size_t in_use() const { return in_use_; }        // bytes of blocks handed out
  std::size_t peak_in_use() const { return peak_in_use_; }

 private:
  struct Block {
    std::uintptr_t segment;
    std::size_t size;
    bool free;
  };
  using Blocks = std::map<std::uintptr_t, Block>;

  void add_segment(std::size_t request);
  void mark_free(Blocks::iterator block);
  void merge(Blocks::iterator first, Blocks::iterator second);

  Source source_;
  Blocks blocks_;                                          // every block of every segment, by address
  std::set<std::pair<std::size_t, std::uintptr_t>> free_;  // the free ones by (size, address)
  std::map<std::uintptr_t, std::size_t> segments_;         // base address -> bytes
  std::size_t held_ = 0, peak_held_ = 0, in_use_ = 0, peak_in_use_ = 0;
};

}  // namespace rf
