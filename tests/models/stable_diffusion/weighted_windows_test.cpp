// Weighted prompts in CLIP windows, as A1111's tokenize_line fills them: every token weighs what
// its run does, BREAK and full windows start new ones, and a comma near a window's end pulls the
// words after it into the next window.
#include <gtest/gtest.h>

#include <string>

#include "models/stable_diffusion/prompt_weights.h"

namespace rf::stable_diffusion {
namespace {

constexpr TokenId kBos = 49406, kEos = 49407, kA = 320, kRed = 736, kApple = 3055, kCat = 2368, kDog = 1929, kComma = 267;

const ClipTokenizer& clip() {
  static const ClipTokenizer tokenizer = ClipTokenizer::from_folder(std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip");
  return tokenizer;
}

WeightedWindows windows_of(const std::string& prompt, const WeightedWindowOptions& options = {}) {
  return tokenize_weighted(clip(), parse_prompt_weights(prompt), options);
}

std::string repeat(const std::string& word, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += word;
  return text;
}

// The window's first `count` ids and weights.
std::vector<TokenId> ids(const WeightedWindows& result, std::size_t window, std::size_t count) {
  return {result.clip.windows.at(window).begin(), result.clip.windows.at(window).begin() + count};
}
std::vector<float> weights(const WeightedWindows& result, std::size_t window, std::size_t count) {
  return {result.weights.at(window).begin(), result.weights.at(window).begin() + count};
}

TEST(WeightedWindows, KnownTokenIds) {
  EXPECT_EQ(clip().encode("a red apple"), (std::vector<TokenId>{kA, kRed, kApple}));
  EXPECT_EQ(clip().encode("cat dog ,"), (std::vector<TokenId>{kCat, kDog, kComma}));
}

TEST(WeightedWindows, EachTokenWeighsWhatItsRunDoes) {
  const WeightedWindows result = windows_of("a (red:1.5) [apple]");
  ASSERT_EQ(result.clip.windows.size(), 1u);
  ASSERT_EQ(result.weights.size(), 1u);
  EXPECT_EQ(ids(result, 0, 6), (std::vector<TokenId>{kBos, kA, kRed, kApple, kEos, kEos}));
  EXPECT_EQ(weights(result, 0, 6), (std::vector<float>{1.0f, 1.0f, 1.5f, static_cast<float>(1 / 1.1), 1.0f, 1.0f}));
  for (std::size_t i = 5; i < kClipContextLength; ++i) ASSERT_EQ(result.weights[0][i], 1.0f) << "position " << i;
}

TEST(WeightedWindows, PaddingFollowsTheModel) {
  const WeightedWindows sd2 = windows_of("(cat)", {.padding = ClipPadding::Zero});
  EXPECT_EQ(ids(sd2, 0, 5), (std::vector<TokenId>{kBos, kCat, kEos, 0, 0}));
  EXPECT_EQ(sd2.clip.windows[0].back(), 0);
  EXPECT_EQ(weights(sd2, 0, 3), (std::vector<float>{1.0f, 1.1f, 1.0f}));
}

TEST(WeightedWindows, EmptyPromptIsOneEmptyWindow) {
  const WeightedWindows result = windows_of("");
  ASSERT_EQ(result.clip.windows.size(), 1u);
  EXPECT_EQ(ids(result, 0, 3), (std::vector<TokenId>{kBos, kEos, kEos}));
}

TEST(WeightedWindows, BreakStartsANewWindow) {
  const WeightedWindows result = windows_of("cat BREAK (dog)");
  ASSERT_EQ(result.clip.windows.size(), 2u);
  EXPECT_EQ(ids(result, 0, 4), (std::vector<TokenId>{kBos, kCat, kEos, kEos}));
  EXPECT_EQ(ids(result, 1, 4), (std::vector<TokenId>{kBos, kDog, kEos, kEos}));
  EXPECT_EQ(weights(result, 1, 3), (std::vector<float>{1.0f, 1.1f, 1.0f}));

  // Every BREAK counts, even one that leaves a window empty; a trailing one adds nothing.
  EXPECT_EQ(windows_of("cat BREAK BREAK dog").clip.windows.size(), 3u);
  EXPECT_EQ(ids(windows_of("cat BREAK BREAK dog"), 1, 3), (std::vector<TokenId>{kBos, kEos, kEos}));
  EXPECT_EQ(windows_of("BREAK cat").clip.windows.size(), 2u);
  EXPECT_EQ(windows_of("cat BREAK").clip.windows.size(), 1u);
  EXPECT_EQ(windows_of("BREAK").clip.windows.size(), 1u);
}

TEST(WeightedWindows, FullWindowsContinueInTheNext) {
  const WeightedWindows result = windows_of(repeat("cat ", 70) + "(" + repeat("dog ", 10) + ")");
  ASSERT_EQ(result.clip.windows.size(), 2u);
  EXPECT_EQ(result.clip.prompt_tokens, 80u);
  EXPECT_EQ(result.clip.windows[0][70], kCat);
  EXPECT_EQ(result.clip.windows[0][71], kDog);
  EXPECT_EQ(result.weights[0][71], 1.1f);
  EXPECT_EQ(result.clip.windows[0][76], kEos);
  EXPECT_EQ(ids(result, 1, 8), (std::vector<TokenId>{kBos, kDog, kDog, kDog, kDog, kDog, kEos, kEos}));
  EXPECT_EQ(weights(result, 1, 7), (std::vector<float>{1.0f, 1.1f, 1.1f, 1.1f, 1.1f, 1.1f, 1.0f}));
}

TEST(WeightedWindows, CommaNearTheEndMovesTheWordsAfterIt) {
  // 70 cats, a comma at position 70, then dogs: the 76th token finds the window full 5 tokens
  // after the comma, within the 20 of the backtrack.
  const std::string prompt = repeat("cat ", 70) + ", " + repeat("(dog) ", 10);
  const WeightedWindows moved = windows_of(prompt);
  ASSERT_EQ(moved.clip.windows.size(), 2u);
  EXPECT_EQ(moved.clip.windows[0][71], kComma);
  EXPECT_EQ(moved.clip.windows[0][72], kEos);
  EXPECT_EQ(moved.weights[0][72], 1.0f);
  EXPECT_EQ(ids(moved, 1, 12), (std::vector<TokenId>{kBos, kDog, kDog, kDog, kDog, kDog, kDog, kDog, kDog, kDog, kDog, kEos}));
  EXPECT_EQ(moved.weights[1][10], 1.1f);

  const WeightedWindows kept = windows_of(prompt, {.comma_backtrack = 0});
  ASSERT_EQ(kept.clip.windows.size(), 2u);
  EXPECT_EQ(kept.clip.windows[0][75], kDog);
  EXPECT_EQ(ids(kept, 1, 8), (std::vector<TokenId>{kBos, kDog, kDog, kDog, kDog, kDog, kDog, kEos}));

  // A comma 25 tokens before the end is too far back for 20.
  const WeightedWindows far = windows_of(repeat("cat ", 50) + ", " + repeat("dog ", 30));
  EXPECT_EQ(far.clip.windows[0][75], kDog);
  EXPECT_EQ(far.clip.windows[1][6], kDog);
  EXPECT_EQ(far.clip.windows[1][7], kEos);
  const WeightedWindows wider = windows_of(repeat("cat ", 50) + ", " + repeat("dog ", 30), {.comma_backtrack = 25});
  EXPECT_EQ(wider.clip.windows[0][52], kEos);
  EXPECT_EQ(wider.clip.windows[1][30], kDog);
  EXPECT_EQ(wider.clip.windows[1][31], kEos);
}

TEST(WeightedWindows, WindowsPastTheLimitAreDropped) {
  const WeightedWindows result = windows_of("(cat) BREAK dog BREAK a red apple", {.max_windows = 2});
  ASSERT_EQ(result.clip.windows.size(), 2u);
  ASSERT_EQ(result.weights.size(), 2u);
  EXPECT_EQ(result.clip.prompt_tokens, 5u);
  EXPECT_EQ(result.clip.dropped, (std::vector<TokenId>{kA, kRed, kApple}));
  EXPECT_EQ(clip().window_notice(result.clip),
            "the prompt has 5 CLIP tokens; 3 past the 2 allowed window(s) of 75 are ignored: \"a red apple\"");
}

}  // namespace
}  // namespace rf::stable_diffusion
