#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_stacks.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf::grammar {
namespace {

bool covers(const std::vector<std::pair<std::uint8_t, std::uint8_t>>& sequence, const std::string& bytes) {
  if (sequence.size() != bytes.size()) return false;
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    const auto b = static_cast<std::uint8_t>(bytes[k]);
    if (b < sequence[k].first || b > sequence[k].second) return false;
  }
  return true;
}

// Every code point's encoding is covered by exactly one sequence when it is in the ranges, by none
// otherwise; checked against unicode::append_utf8 over the whole code space.
TEST(Utf8ByteRanges, CoverExactlyTheCodePointsOfTheRanges) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<CodePointRange> ranges;
    std::uniform_int_distribution<std::uint32_t> point(0, trial < 3 ? 0x3000 : 0x10FFFF);
    for (int i = 0; i < 4; ++i) {
      char32_t a = point(rng), b = point(rng);
      ranges.push_back({std::min(a, b), std::max(a, b)});
    }
    const auto sequences = utf8_byte_ranges(ranges);
    std::size_t wrong = 0;
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      std::string bytes;
      unicode::append_utf8(bytes, c);
      const bool in = std::any_of(ranges.begin(), ranges.end(), [&](auto r) { return c >= r.first && c <= r.last; });
      const auto hits = std::count_if(sequences.begin(), sequences.end(), [&](const auto& s) { return covers(s, bytes); });
      wrong += hits != (in ? 1 : 0);
    }
    std::printf("trial %d: %zu sequences, %zu code points wrongly covered (tolerance 0)\n", trial, sequences.size(), wrong);
    EXPECT_EQ(wrong, 0u);
  }
}

TEST(GrammarBuilder, RefusesUndefinedAndLeftRecursiveRules) {
  {
    GrammarBuilder b;
    b.define(b.rule("root"), {{b.reference(b.rule("missing"))}});
    EXPECT_THROW(std::move(b).build("root"), Error);
  }
  {
    GrammarBuilder b;  // root ::= opt root "x" | "y", with opt nullable
    const auto root = b.rule("root"), opt = b.rule("opt");
    b.define(opt, {b.literal("z"), {}});
    auto x = b.literal("x");
    Sequence recursive{b.reference(opt), b.reference(root)};
    recursive.insert(recursive.end(), x.begin(), x.end());
    b.define(root, {recursive, b.literal("y")});
    try {
      std::move(b).build("root");
      FAIL() << "left recursion through a nullable rule was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace rf::grammar
