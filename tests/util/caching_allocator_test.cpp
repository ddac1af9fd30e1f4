#include "util/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "util/error.h"

namespace rf {
namespace {

constexpr std::size_t kMiB = 1u << 20;

// Host memory standing in for a device's, with a capacity; counts what it is asked.
struct HostMemory {
  std::size_t capacity = 1ull << 40;
  std::size_t used = 0, allocations = 0, releases = 0, waits = 0;
  std::map<void*, std::size_t> live;

  CachingAllocator::Source source() {
    return {[this](std::size_t bytes) -> void* {
              if (used + bytes > capacity) return nullptr;
              void* p = std::aligned_alloc(CachingAllocator::kAlignment, bytes);
              used += bytes;
              ++allocations;
              live[p] = bytes;
              return p;
            },
            [this](void* p) {
              used -= live.at(p);
              live.erase(p);
              ++releases;
              std::free(p);
            },
            [this] { ++waits; }};
  }
};

TEST(CachingAllocator, BlocksInUseNeverOverlapAndFreedOnesMergeWhole) {
  HostMemory memory;
  CachingAllocator allocator(memory.source());
  std::mt19937 rng(7);
  struct Use {
    unsigned char* p;
    std::size_t bytes;
    unsigned char mark;
  };
  std::vector<Use> uses;
  std::size_t requested_peak = 0, requested = 0;
  for (int i = 0; i < 4000; ++i) {
    if (!uses.empty() && rng() % 2 == 0) {  // free a random one, after checking nobody wrote over it
      const std::size_t k = rng() % uses.size();
      const Use use = uses[k];
      for (std::size_t j = 0; j < use.bytes; j += 97) ASSERT_EQ(use.p[j], use.mark) << "block " << k << " overwritten";
      allocator.free(use.p);
      requested -= use.bytes;
      uses.erase(uses.begin() + static_cast<long>(k));
      continue;
    }
    // Sizes from bytes to 8 MiB, as a UNet's activations, norms' sums and attention scores are.
    const std::size_t bytes = 1 + (rng() % 3 == 0 ? rng() % (8 * kMiB) : rng() % 4096);
    auto* p = static_cast<unsigned char*>(allocator.allocate(bytes));
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % CachingAllocator::kAlignment, 0u);
    const auto mark = static_cast<unsigned char>(i);
    std::memset(p, mark, bytes);
    uses.push_back({p, bytes, mark});
    requested += bytes;
    requested_peak = std::max(requested_peak, requested);
  }
  for (const Use& use : uses) allocator.free(use.p);
  EXPECT_EQ(allocator.in_use(), 0u);
  EXPECT_GE(allocator.peak_in_use(), requested_peak);
  // Best fit with merging holds little past the peak in use (exact-size lists held several times it).
  std::printf("held at the peak %.1f MiB for %.1f MiB in use at the peak (bound 1.5x)\n",
              allocator.peak_held() / double(kMiB), allocator.peak_in_use() / double(kMiB));
  EXPECT_LE(allocator.peak_held(), allocator.peak_in_use() * 3 / 2);
  // Every segment is one free block again, so all of them go back.
  allocator.release_free_segments();
  EXPECT_EQ(allocator.held(), 0u);
  EXPECT_EQ(memory.used, 0u);
  EXPECT_EQ(memory.waits, 1u);
}

TEST(CachingAllocator, AFreedBlockServesSmallerRequestsBySplitting) {
  HostMemory memory;
  CachingAllocator allocator(memory.source());
  void* big = allocator.allocate(10 * kMiB);
  allocator.free(big);
  void* a = allocator.allocate(4 * kMiB);
  void* b = allocator.allocate(6 * kMiB);
  EXPECT_EQ(memory.allocations, 1u);
  EXPECT_EQ(a, big);
  EXPECT_EQ(static_cast<char*>(b), static_cast<char*>(a) + 4 * kMiB);
  allocator.free(a);
  allocator.free(b);
  EXPECT_EQ(allocator.allocate(10 * kMiB), big);  // merged again
  EXPECT_EQ(memory.allocations, 1u);
}

TEST(CachingAllocator, TakesTheSmallestFreeBlockThatFits) {
  HostMemory memory;
  CachingAllocator allocator(memory.source());
  void* eight = allocator.allocate(8 * kMiB);
  void* four = allocator.allocate(4 * kMiB);
  allocator.free(eight);
  allocator.free(four);
  EXPECT_EQ(allocator.allocate(3 * kMiB), four);
  EXPECT_EQ(allocator.allocate(5 * kMiB), eight);
}

TEST(CachingAllocator, GivesBackFreeSegmentsWhenTheSourceIsFull) {
  HostMemory memory;
  memory.capacity = 16 * kMiB;
  CachingAllocator allocator(memory.source());
  void* kept = allocator.allocate(4 * kMiB);
  allocator.free(allocator.allocate(8 * kMiB));  // free, but too small for what comes next
  EXPECT_EQ(memory.used, 12 * kMiB);
  void* p = allocator.allocate(12 * kMiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(memory.waits, 1u);
  EXPECT_EQ(memory.used, 16 * kMiB);
  EXPECT_EQ(allocator.held(), 16 * kMiB);
  try {
    allocator.allocate(1 * kMiB);
    ADD_FAILURE() << "no error when the source has no room";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory (or at the --gpu-memory bound): 2.0 MiB more were needed, with 16.0 MiB in use"),
              std::string::npos)
        << e.what();
  }
  allocator.free(kept);
  allocator.free(p);
}

TEST(CachingAllocator, RefusesToFreeWhatItDidNotHandOut) {
  HostMemory memory;
  CachingAllocator allocator(memory.source());
  void* p = allocator.allocate(100);
  int elsewhere = 0;
  EXPECT_THROW(allocator.free(&elsewhere), Error);
  allocator.free(p);
  EXPECT_THROW(allocator.free(p), Error);
}

}  // namespace
}  // namespace rf
