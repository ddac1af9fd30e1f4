// util/rank_threads.h: each rank's work on its own thread, always the same one; failures reported.
#include "util/rank_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>

namespace rf {
namespace {

TEST(RankThreads, EachRankKeepsItsOwnThread) {
  RankThreads threads(3);
  std::vector<std::thread::id> first(3), second(3);
  threads.run([&](int r) { first[r] = std::this_thread::get_id(); });
  threads.run([&](int r) { second[r] = std::this_thread::get_id(); });
  EXPECT_EQ(first, second);
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 3u);
  EXPECT_NE(first[0], std::this_thread::get_id());
}

// The ranks run at once: each waits for all the others to arrive.
TEST(RankThreads, RanksRunTogether) {
  RankThreads threads(4);
  std::atomic<int> arrived = 0;
  threads.run([&](int) {
    ++arrived;
    while (arrived.load() < 4) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 4);
}

// A failing rank's peers may be waiting on it: on_failure runs once, and the first error (the cause,
// not the released rank's) reaches the caller.
TEST(RankThreads, FailureReleasesTheOthersAndIsRethrown) {
  std::atomic<bool> released = false;
  std::atomic<int> failures_seen = 0;
  RankThreads threads(3, [&] {
    ++failures_seen;
    released = true;
  });
  try {
    threads.run([&](int r) {
      if (r == 0) {
        while (!released) std::this_thread::yield();  // a collective waiting for rank 2
        throw std::runtime_error("rank 0 released");
      }
      if (r == 2) throw std::runtime_error("rank 2 failed");
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 2 failed");
  }
  EXPECT_EQ(failures_seen.load(), 1);
  int ran = 0;
  threads.run([&](int) { ++ran; });  // the threads outlive a failure
}

}  // namespace
}  // namespace rf
