#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace rf {
namespace {

// How many times parallel_for handed each index of [0, n) to the function.
std::vector<int> visits(ThreadPool& pool, std::size_t n, std::size_t grain) {
  auto counts = std::make_unique<std::atomic<int>[]>(n);
  pool.parallel_for(n, grain, [&](std::size_t begin, std::size_t end) {
    EXPECT_LT(begin, end);
    EXPECT_LE(end, n);
    for (std::size_t i = begin; i < end; ++i) counts[i].fetch_add(1);
  });
  std::vector<int> result(n);
  for (std::size_t i = 0; i < n; ++i) result[i] = counts[i].load();
  return result;
}

TEST(ThreadPool, RunsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (std::size_t n : {1u, 2u, 7u, 64u, 1001u}) {
      for (std::size_t grain : {0u, 1u, 3u, 5000u}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, n " << n << ", grain " << grain);
        EXPECT_EQ(visits(pool, n, grain), std::vector<int>(n, 1));
      }
    }
  }
}

TEST(ThreadPool, NothingToDoCallsNothing) {
  ThreadPool pool(4);
  bool called = false;
  pool.parallel_for(0, 1, [&](std::size_t, std::size_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, ChunksHoldAtLeastTheGrain) {
  ThreadPool pool(4);
  std::atomic<int> chunks = 0;
  pool.parallel_for(100, 40, [&](std::size_t begin, std::size_t end) {
    EXPECT_GE(end - begin, 33u);  // 100 items in at most ceil(100 / 40) = 3 chunks
    chunks.fetch_add(1);
  });
  EXPECT_LE(chunks.load(), 3);
}

TEST(ThreadPool, SpreadsWorkOverThreads) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  std::atomic<int> arrived = 0;
  // Each chunk waits (for a while) until all four have started, which only happens if four threads run them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  pool.parallel_for(4, 1, [&](std::size_t, std::size_t) {
    {
      std::lock_guard lock(mutex);
      seen.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    while (arrived.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  EXPECT_EQ(seen.size(), 4u);
}

TEST(ThreadPool, ManyJobsInARow) {
  ThreadPool pool(3);
  for (int job = 0; job < 2000; ++job) {
    std::atomic<std::size_t> sum = 0;
    pool.parallel_for(10, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
    ASSERT_EQ(sum.load(), 45u) << "job " << job;
  }
}

}  // namespace
}  // namespace rf
