// The mixture-of-experts router (models/llama/moe.h) against hand-computed values.
#include "models/llama/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace rf::llama {
namespace {

constexpr double kTolerance = 1e-6;

void expect_weight(float got, double want, const char* what) {
  fmt::print("{}: {:.9f} vs {:.9f}, error {:.1e}, tolerance {:.0e}\n", what, got, want, std::abs(got - want), kTolerance);
  EXPECT_NEAR(got, want, kTolerance) << what;
}

// logits ln 1, ln 2, ln 3, ln 4: probabilities 0.1, 0.2, 0.3, 0.4.
const std::vector<float> kLogits = {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)};

TEST(MoeRouter, TopTwoRenormalisedAsMixtral) {
  ExpertChoice out[2];
  route(kLogits.data(), 4, 2, true, out);
  EXPECT_EQ(out[0].expert, 3);
  EXPECT_EQ(out[1].expert, 2);
  expect_weight(out[0].weight, 0.4 / 0.7, "top-2 renormalised, first");
  expect_weight(out[1].weight, 0.3 / 0.7, "top-2 renormalised, second");
}

TEST(MoeRouter, WithoutNormTopkProbTheWeightsAreTheSoftmaxOverAllExperts) {
  ExpertChoice out[3];
  route(kLogits.data(), 4, 3, false, out);
  EXPECT_EQ(out[0].expert, 3);
  EXPECT_EQ(out[1].expert, 2);
  EXPECT_EQ(out[2].expert, 1);
  expect_weight(out[0].weight, 0.4, "top-3 unnormalised, first");
  expect_weight(out[1].weight, 0.3, "top-3 unnormalised, second");
  expect_weight(out[2].weight, 0.2, "top-3 unnormalised, third");
}

TEST(MoeRouter, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {1000.0f, 1000.0f + std::log(3.0f), -1000.0f};
  ExpertChoice out[1];
  route(logits.data(), 3, 1, false, out);
  EXPECT_EQ(out[0].expert, 1);
  const double d = static_cast<double>(logits[1]) - 1000.0;  // ln 3 as float rounds 1000 + ln 3 (ulp 6e-5)
  expect_weight(out[0].weight, std::exp(d) / (1 + std::exp(d)), "top-1 of [1000, 1000 + ln 3, -1000]");
}

// torch.topk leaves the order of equal values undefined; here the lower index comes first, also
// across the k-th place.
TEST(MoeRouter, TiesGoToTheLowerExpertIndex) {
  const std::vector<float> logits = {0.5f, 2.0f, 0.5f, 2.0f, 0.5f};
  ExpertChoice out[3];
  route(logits.data(), 5, 3, true, out);
  EXPECT_EQ(out[0].expert, 1);
  EXPECT_EQ(out[1].expert, 3);
  EXPECT_EQ(out[2].expert, 0);
  const double big = std::exp(1.5), sum = 2 * big + 1;
  expect_weight(out[0].weight, big / sum, "tied first");
  expect_weight(out[1].weight, big / sum, "tied second");
  expect_weight(out[2].weight, 1 / sum, "tie at the k-th place");
}

TEST(MoeRouter, GroupsTokensByExpertInBatchOrder) {
  // token 0 -> experts 2, 0; token 1 -> 0, 1; token 2 -> 2, 1
  const std::vector<ExpertChoice> choices = {{2, 0.6f}, {0, 0.4f}, {0, 0.9f}, {1, 0.1f}, {2, 0.5f}, {1, 0.5f}};
  ExpertGroups g;
  group_by_expert(choices, 3, 2, 4, g);
  EXPECT_EQ(g.begin, (std::vector<int>{0, 2, 4, 6, 6}));
  EXPECT_EQ(g.tokens, (std::vector<int>{0, 1, 1, 2, 0, 2}));
  EXPECT_EQ(g.weights, (std::vector<float>{0.4f, 0.9f, 0.1f, 0.5f, 0.6f, 0.5f}));
}

}  // namespace
}  // namespace rf::llama
