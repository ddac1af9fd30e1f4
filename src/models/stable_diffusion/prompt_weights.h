#pragma once
// Emphasis in Stable Diffusion prompts, written the way AUTOMATIC1111's web UI reads it
// (modules/prompt_parser.py, parse_prompt_attention), and A1111's way of turning the weighted
// text into CLIP windows with a weight per token.
//
//   (text)      weight x1.1, nested ((text)) x1.21      [text]  weight /1.1
//   (text:1.3)  weight x1.3                             \( \) \[ \] \\  the characters themselves
//   BREAK       (a word of its own, upper case) starts a new 75-token window
//
// A bracket left open weighs everything after it; a closing bracket without its opening one, and
// a ':' not followed by a number and ')', are plain text; a lone backslash vanishes. Adjacent runs
// of equal weight are merged. One departure from A1111: a BREAK inside brackets still breaks (A1111
// multiplies its -1 marker too, which turns it into the word "BREAK" with a negative weight).
// Prompt editing ([a:b:0.5], [a|b]) and extra networks (<lora:...>) are not parsed here.
#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/clip_tokenizer.h"

namespace rf::stable_diffusion {

struct PromptRun {
  std::string text;
  double weight = 1.0;     // the product of the enclosing brackets' multipliers, in A1111's order
  bool is_break = false;  // a BREAK (text empty, weight 1): the next run starts a new window

  bool operator==(const PromptRun&) const = default;
};

// The prompt as runs of text with their weights; an empty prompt gives one empty run.
// Throws for a weight that is not a number, e.g. "(a:1.2.3)", as A1111 fails on it.
std::vector<PromptRun> parse_prompt_weights(std::string_view prompt);

struct WeightedWindowOptions {
  ClipPadding padding = ClipPadding::EndOfText;
  std::size_t max_windows = std::numeric_limits<std::size_t>::max();  // A1111 sets no limit
  // A1111's "comma_padding_backtrack" (default 20): when a window fills up less than this many
  // tokens after a comma, the words after the comma move to the next window. 0 turns it off.
  std::size_t comma_backtrack = 20;
};

struct WeightedWindows {
  ClipWindows clip;
  std::vector<std::array<float, kClipContextLength>> weights;  // one per window; 1 for BOS, EOS, padding
};

// Each run is tokenized on its own and each token weighs what its run does (A1111's tokenize_line).
WeightedWindows tokenize_weighted(const ClipTokenizer& tokenizer, const std::vector<PromptRun>& runs,
                                  const WeightedWindowOptions& options = {});

}  // namespace rf::stable_diffusion
