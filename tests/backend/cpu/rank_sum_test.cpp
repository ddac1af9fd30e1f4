// backend/cpu/rank_sum.h: every rank gets the same sum, added in rank order; abort releases waiters.
#include "backend/cpu/rank_sum.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace rf::cpu {
namespace {

TEST(RankSum, EveryRankGetsTheSumInRankOrder) {
  constexpr int kRanks = 3, kValues = 1000, kRounds = 5;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1, 1);
  RankSum sum(kRanks);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::vector<float>> values(kRanks, std::vector<float>(kValues));
    for (auto& v : values) for (float& x : v) x = value(rng);
    std::vector<float> want(kValues, 0.0f);
    for (const auto& v : values) for (int i = 0; i < kValues; ++i) want[i] += v[i];
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { sum.sum(r, values[r]); });
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(values[r], want) << "rank " << r << ", round " << round;
  }
}

TEST(RankSum, AbortReleasesARankWaitingForTheOthers) {
  RankSum sum(2);
  std::vector<float> values(4, 1.0f);
  std::thread waiting([&] { EXPECT_THROW(sum.sum(0, values), Error); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  sum.abort();
  waiting.join();
}

}  // namespace
}  // namespace rf::cpu
