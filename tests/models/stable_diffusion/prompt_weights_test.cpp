// A1111's emphasis syntax: the expected runs follow the semantics its web UI documents (the
// examples of parse_prompt_attention's docstring among them), worked out by hand; weights are
// compared exactly, since A1111 merges runs only when their weights are equal as doubles.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "models/stable_diffusion/prompt_weights.h"
#include "util/error.h"

namespace rf::stable_diffusion {

// Printed by gtest when a comparison fails.
void PrintTo(const PromptRun& run, std::ostream* out) {
  *out << (run.is_break ? std::string("BREAK") : fmt::format("({:?}, {})", run.text, run.weight));
}

namespace {

const PromptRun kBreakRun{"", 1.0, true};

// 1.1 and 1/1.1 multiplied in A1111's order, written out as the doubles they make.
constexpr double k11 = 1.1, k121 = 1.2100000000000002, k1331 = 1.3310000000000004, k14641 = 1.4641000000000006;
constexpr double kSquare = 0.9090909090909091, kSquare2 = 0.8264462809917354;

using Runs = std::vector<PromptRun>;

TEST(PromptWeights, PlainTextIsOneRun) {
  EXPECT_EQ(parse_prompt_weights("a photo of a cat"), (Runs{{"a photo of a cat", 1.0}}));
  EXPECT_EQ(parse_prompt_weights(""), (Runs{{"", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a:b, c"), (Runs{{"a:b, c", 1.0}}));
}

TEST(PromptWeights, BracketsMultiply) {
  EXPECT_EQ(parse_prompt_weights("a (red:1.5) apple"), (Runs{{"a ", 1.0}, {"red", 1.5}, {" apple", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(x)"), (Runs{{"x", k11}}));
  EXPECT_EQ(parse_prompt_weights("((x))"), (Runs{{"x", k121}}));
  EXPECT_EQ(parse_prompt_weights("(((x)))"), (Runs{{"x", k1331}}));
  EXPECT_EQ(parse_prompt_weights("[x]"), (Runs{{"x", kSquare}}));
  EXPECT_EQ(parse_prompt_weights("[[x]]"), (Runs{{"x", kSquare2}}));
  EXPECT_EQ(parse_prompt_weights("a (b (c:2) d) e"), (Runs{{"a ", 1.0}, {"b ", k11}, {"c", 2.2}, {" d", k11}, {" e", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("([x])"), (Runs{{"x", 1.0}}));  // (1/1.1) * 1.1 is exactly 1
}

TEST(PromptWeights, ExplicitWeightsAsPythonFloatReadsThem) {
  EXPECT_EQ(parse_prompt_weights("(x:0.5)"), (Runs{{"x", 0.5}}));
  EXPECT_EQ(parse_prompt_weights("(x: 1.25 )"), (Runs{{"x", 1.25}}));
  EXPECT_EQ(parse_prompt_weights("(x:+2)"), (Runs{{"x", 2.0}}));
  EXPECT_EQ(parse_prompt_weights("(x:-1)"), (Runs{{"x", -1.0}}));
  EXPECT_EQ(parse_prompt_weights("(x:.5)"), (Runs{{"x", 0.5}}));
  EXPECT_EQ(parse_prompt_weights("a (x:1.) b"), (Runs{{"a x b", 1.0}}));  // weight 1 merges with its neighbours
}

TEST(PromptWeights, ExamplesOfA1111Documentation) {
  EXPECT_EQ(parse_prompt_weights("normal text"), (Runs{{"normal text", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("an (important) word"), (Runs{{"an ", 1.0}, {"important", k11}, {" word", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(unbalanced"), (Runs{{"unbalanced", k11}}));
  EXPECT_EQ(parse_prompt_weights("\\(literal\\]"), (Runs{{"(literal]", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(unnecessary)(parens)"), (Runs{{"unnecessaryparens", k11}}));
  EXPECT_EQ(parse_prompt_weights("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky)))."),
            (Runs{{"a ", 1.0},
                  {"house", 1.5730000000000004},
                  {" ", k11},
                  {"on", 1.0},
                  {" a ", k11},
                  {"hill", 0.55},
                  {", sun, ", k11},
                  {"sky", k14641},
                  {".", k11}}));
}

TEST(PromptWeights, UnbalancedBracketsWeighTheRestOrAreText) {
  EXPECT_EQ(parse_prompt_weights("(a"), (Runs{{"a", k11}}));
  EXPECT_EQ(parse_prompt_weights("x [a"), (Runs{{"x ", 1.0}, {"a", kSquare}}));
  EXPECT_EQ(parse_prompt_weights("a)"), (Runs{{"a)", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a] b"), (Runs{{"a] b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a:1.5)"), (Runs{{"a:1.5)", 1.0}}));      // a weight with no '(' is text
  EXPECT_EQ(parse_prompt_weights("(a:1.5"), (Runs{{"a:1.5", k11}}));       // no ')': ':' is text
  EXPECT_EQ(parse_prompt_weights("[a:1.5]"), (Runs{{"a:1.5", kSquare}}));  // weights close '(' only
  EXPECT_EQ(parse_prompt_weights("(a:1.5]"), (Runs{{"a:1.5]", k11}}));
  // Open brackets left at the end multiply round ones first: ((1.1 * 1.1) / 1.1) for "b".
  EXPECT_EQ(parse_prompt_weights("([a (b"), (Runs{{"a ", 1.0}, {"b", k121 * kSquare}}));
}

TEST(PromptWeights, EscapesAndBackslashes) {
  EXPECT_EQ(parse_prompt_weights("\\(a\\) \\[b\\]"), (Runs{{"(a) [b]", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(\\(a\\))"), (Runs{{"(a)", k11}}));
  EXPECT_EQ(parse_prompt_weights("a \\\\ b"), (Runs{{"a \\ b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("C:\\path"), (Runs{{"C:path", 1.0}}));  // a lone backslash vanishes
  EXPECT_EQ(parse_prompt_weights("end\\"), (Runs{{"end", 1.0}}));
}

TEST(PromptWeights, EmptyBracketsLeaveNothing) {
  EXPECT_EQ(parse_prompt_weights("()"), (Runs{{"", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(:1.5)"), (Runs{{"", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a () b"), (Runs{{"a  b", 1.0}}));
}

TEST(PromptWeights, BreakSplitsRuns) {
  EXPECT_EQ(parse_prompt_weights("a BREAK b"), (Runs{{"a", 1.0}, kBreakRun, {"b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a \n BREAK\tb"), (Runs{{"a", 1.0}, kBreakRun, {"b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a,BREAK,b"), (Runs{{"a,", 1.0}, kBreakRun, {",b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("BREAK"), (Runs{{"", 1.0}, kBreakRun, {"", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("a BREAK BREAK b"), (Runs{{"a", 1.0}, kBreakRun, {"", 1.0}, kBreakRun, {"b", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("(a) BREAK b"), (Runs{{"a", k11}, {"", 1.0}, kBreakRun, {"b", 1.0}}));
  // Only the upper-case word on its own breaks.
  EXPECT_EQ(parse_prompt_weights("aBREAK BREAKs break BREAK_ BREAK1"), (Runs{{"aBREAK BREAKs break BREAK_ BREAK1", 1.0}}));
  EXPECT_EQ(parse_prompt_weights("é BREAK ü"), (Runs{{"é", 1.0}, kBreakRun, {"ü", 1.0}}));
  // Where this departs from A1111 (which turns it into the word with weight -1.1): still a break.
  EXPECT_EQ(parse_prompt_weights("(a BREAK b)"), (Runs{{"a", k11}, kBreakRun, {"b", k11}}));
}

TEST(PromptWeights, NonNumericWeightFails) {
  EXPECT_THROW(parse_prompt_weights("(x:1.2.3)"), Error);
  EXPECT_THROW(parse_prompt_weights("(x:.)"), Error);
  EXPECT_NO_THROW(parse_prompt_weights("x:1.2.3)"));  // no '(': plain text
}

}  // namespace
}  // namespace rf::stable_diffusion
