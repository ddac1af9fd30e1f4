#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "util/error.h"

namespace rf {
namespace {

std::vector<float> random_logits(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (auto& l : logits) l = dist(rng);
  return logits;
}

SamplingParams unfiltered(double temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0;
  p.min_p = 0.0;
  return p;
}

TEST(Sampler, GreedyPicksTheArgmax) {
  auto logits = random_logits(1000, std::random_device{}());
  const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
  Sampler sampler(unfiltered(0.0));
  EXPECT_EQ(sampler.sample(logits, {}), expected);
}

TEST(Sampler, SameSeedSameTokens) {
  const auto logits = random_logits(500, std::random_device{}());
  SamplingParams p = unfiltered(1.0);
  p.seed = 1234;
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) {
    auto la = logits, lb = logits;
    EXPECT_EQ(a.sample(la, {}), b.sample(lb, {}));
  }
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  const auto logits = random_logits(200, std::random_device{}());
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return logits[a] > logits[b]; });
  SamplingParams p = unfiltered(5.0);  // hot, so the tail would be drawn without the filter
  p.top_k = 3;
  Sampler sampler(p);
  for (int i = 0; i < 200; ++i) {
    auto l = logits;
    const auto id = sampler.sample(l, {});
    EXPECT_TRUE(id == static_cast<int>(order[0]) || id == static_cast<int>(order[1]) || id == static_cast<int>(order[2]));
  }
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // Probabilities at temperature 1: 0.5, 0.25, 0.125, 0.125 (as logits ln p).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};
  SamplingParams top_p = unfiltered(1.0);
  top_p.top_p = 0.7;  // 0.5 + 0.25 reaches 0.7: two tokens survive
  SamplingParams min_p = unfiltered(1.0);
  min_p.min_p = 0.4;  // 0.4 * 0.5 = 0.2: tokens 0 and 1 survive
  for (const auto& p : {top_p, min_p}) {
    Sampler sampler(p);
    std::map<int, int> seen;
    for (int i = 0; i < 400; ++i) {
      auto l = logits;
      ++seen[sampler.sample(l, {})];
    }
    EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
    EXPECT_GT(seen[0], seen[1]);
    EXPECT_GT(seen[1], 0);
  }
}

TEST(Sampler, TemperatureMatchesTheSoftmaxDistribution) {
  const std::vector<float> logits = {1.0f, 0.0f};
  SamplingParams p = unfiltered(2.0);
  p.seed = std::random_device{}();
  Sampler sampler(p);
  int first = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    auto l = logits;
    first += sampler.sample(l, {}) == 0;
  }
  const double expected = 1.0 / (1.0 + std::exp(-0.5));  // softmax of (1, 0) / 2
  EXPECT_NEAR(first / double(draws), expected, 0.015) << "seed " << p.seed;  // ~4 standard deviations
}

TEST(Sampler, PenaltiesFollowLlamaCpp) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
  SamplingParams p = unfiltered(0.0);
  p.repetition_penalty = 2.0;
  p.presence_penalty = 0.25;
  p.frequency_penalty = 0.5;
  Sampler sampler(p);
  const std::vector<std::int32_t> history = {0, 1, 1, 3};
  sampler.sample(logits, history);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f * 2 - 1.0f - 0.25f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  EXPECT_FLOAT_EQ(logits[3], 0.5f / 2 - 0.5f - 0.25f);
}

// OpenAI's logit_bias is added to the logits before the penalties: -100 bans the argmax, 100 forces a
// token far below it.
TEST(Sampler, LogitBiasIsAddedBeforeThePenalties) {
  auto logits = random_logits(1000, std::random_device{}());
  const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const auto worst = static_cast<std::int32_t>(std::min_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams p = unfiltered(0.0);
  p.logit_bias = {{best, -100.0f}};
  auto banned = logits;
  EXPECT_NE(Sampler(p).sample(banned, {}), best);
  EXPECT_FLOAT_EQ(banned[best], logits[best] - 100.0f);
  p.logit_bias = {{worst, 100.0f}};
  p.repetition_penalty = 2.0;
  auto forced = logits;
  const std::vector<std::int32_t> history = {worst};
  Sampler(p).sample(forced, history);
  const float biased = logits[worst] + 100.0f;
  EXPECT_FLOAT_EQ(forced[worst], biased > 0 ? biased / 2 : biased * 2);
}

TEST(Sampler, RejectsInvalidParameters) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.top_p = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.min_p = 2;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.repetition_penalty = 0;
  EXPECT_THROW(Sampler{p}, Error);
  p = SamplingParams{};
  p.logit_bias = {{3, 101.0f}};
  EXPECT_THROW(Sampler{p}, Error);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler{p}, Error);
}

// A grammar's mask: the tokens it allows keep their logits, every other one (those past the mask's
// end included) is -infinity, and a draw at any temperature picks only allowed tokens.
TEST(MaskLogits, LeavesOnlyTheAllowedTokens) {
  const std::size_t vocab = 150;  // past the mask's two words: ids 128..149 are not in it
  std::vector<std::uint64_t> allowed(2, 0);
  for (int id : {0, 3, 64, 127}) allowed[id / 64] |= std::uint64_t{1} << (id % 64);
  const auto original = random_logits(vocab, 11);
  auto logits = original;
  mask_logits(logits, allowed);
  for (std::size_t id = 0; id < vocab; ++id) {
    const bool kept = id == 0 || id == 3 || id == 64 || id == 127;
    EXPECT_EQ(logits[id], kept ? original[id] : -std::numeric_limits<float>::infinity()) << id;
  }
  SamplingParams p;
  p.temperature = 1.5;
  p.top_k = 0;
  p.min_p = 0;
  p.seed = 5;
  Sampler sampler(p);
  for (int i = 0; i < 200; ++i) {
    auto row = original;
    mask_logits(row, allowed);
    const auto token = sampler.sample(row, {});
    EXPECT_TRUE(token == 0 || token == 3 || token == 64 || token == 127) << token;
  }
}

}  // namespace
}  // namespace rf
