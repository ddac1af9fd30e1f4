#include "models/stable_diffusion/prompt_weights.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

constexpr double kRoundMultiplier = 1.1;
constexpr double kSquareMultiplier = 1 / 1.1;
constexpr std::string_view kBreak = "BREAK";
constexpr std::string_view kSyntax = "\\()[]:";  // what ends a stretch of plain text

// Python's \s (A1111's patterns are Python regexes): White_Space plus the separators U+001C..U+001F.
bool is_python_space(char32_t c) { return unicode::is_whitespace(c) || (c >= 0x1C && c <= 0x1F); }

std::size_t skip_spaces(std::string_view text, std::size_t pos) {
  std::size_t length = 0;
  while (pos < text.size() && is_python_space(unicode::decode_utf8(text, pos, length))) pos += length;
  return pos;
}

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// Python's float() of what A1111's [+-]?[.\d]+ matched ("1.", ".5", "+2" are numbers, "1.2.3" is not).
double parse_weight(std::string_view number) {
  std::string_view digits = number.starts_with('+') ? number.substr(1) : number;
  double value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) fail("prompt: the weight '{}' is not a number", number);
  return value;
}

// The end of ":<spaces><number><spaces>)" starting at `pos` (a ':'), and the number; nullopt if
// what follows the colon is not that.
struct WeightClose {
  std::size_t end;
  std::string_view number;
};
std::optional<WeightClose> match_weight_close(std::string_view prompt, std::size_t pos) {
  std::size_t at = skip_spaces(prompt, pos + 1);
  const std::size_t number_begin = at;
  if (at < prompt.size() && (prompt[at] == '+' || prompt[at] == '-')) ++at;
  const std::size_t digits_begin = at;
  while (at < prompt.size() && (is_ascii_digit(prompt[at]) || prompt[at] == '.')) ++at;
  if (at == digits_begin) return std::nullopt;
  const std::string_view number = prompt.substr(number_begin, at - number_begin);
  at = skip_spaces(prompt, at);
  if (at == prompt.size() || prompt[at] != ')') return std::nullopt;
  return WeightClose{at + 1, number};
}

// Whether Python's \b holds before a word starting at `pos` / after one ending there. Python's word
// characters are letters, digits and '_'; unicode::is_word_character also counts marks and
// joiners, a difference no prompt should meet.
bool word_boundary_before(std::string_view text, std::size_t pos) {
  std::size_t length = 0;
  return pos == 0 || !unicode::is_word_character(unicode::decode_utf8_before(text, pos, length));
}
bool word_boundary_after(std::string_view text, std::size_t pos) {
  std::size_t length = 0;
  return pos == text.size() || !unicode::is_word_character(unicode::decode_utf8(text, pos, length));
}

// A1111's parse state: the runs so far and, for each open bracket, where its runs begin.
class Parser {
 public:
  std::vector<PromptRun> parse(std::string_view prompt);

 private:
  std::size_t step(std::string_view prompt, std::size_t pos);
  void close(std::vector<std::size_t>& open, double multiplier, std::string_view text);
  void add_text(std::string_view text);  // cut at BREAKs, as A1111's re.split(\s*\bBREAK\b\s*)
  void multiply_from(std::size_t first_run, double multiplier);
  void merge_equal_weights();

  std::vector<PromptRun> runs_;
  std::vector<std::size_t> round_, square_;
};

std::vector<PromptRun> Parser::parse(std::string_view prompt) {
  for (std::size_t pos = 0; pos < prompt.size();) pos = step(prompt, pos);
  // Brackets left open weigh the rest of the prompt: round ones first, in the order they opened.
  for (const std::size_t first : round_) multiply_from(first, kRoundMultiplier);
  for (const std::size_t first : square_) multiply_from(first, kSquareMultiplier);
  if (runs_.empty()) runs_.push_back({});
  merge_equal_weights();
  return std::move(runs_);
}

// Handles the syntax element at `pos`, returning where the next begins.
std::size_t Parser::step(std::string_view prompt, std::size_t pos) {
  const char c = prompt[pos];
  if (c == '\\') {
    // An escape stands for its character (never a BREAK); a lone backslash for nothing.
    const bool escape = pos + 1 < prompt.size() && std::string_view("()[]\\").find(prompt[pos + 1]) != std::string_view::npos;
    runs_.push_back({escape ? std::string(1, prompt[pos + 1]) : std::string()});
    return pos + (escape ? 2 : 1);
  }
  if (c == '(' || c == '[') {
    (c == '(' ? round_ : square_).push_back(runs_.size());
    return pos + 1;
  }
  if (c == ':') {
    const auto weight = match_weight_close(prompt, pos);
    if (!weight) {
      add_text(":");
      return pos + 1;
    }
    if (round_.empty()) {
      add_text(prompt.substr(pos, weight->end - pos));
    } else {
      multiply_from(round_.back(), parse_weight(weight->number));
      round_.pop_back();
    }
    return weight->end;
  }
  if (c == ')' || c == ']') {
    close(c == ')' ? round_ : square_, c == ')' ? kRoundMultiplier : kSquareMultiplier, prompt.substr(pos, 1));
    return pos + 1;
  }
  const std::size_t end = std::min(prompt.find_first_of(kSyntax, pos), prompt.size());
  add_text(prompt.substr(pos, end - pos));
  return end;
}

// A closing bracket weighs the runs since its opening one; without one it is plain text.
void Parser::close(std::vector<std::size_t>& open, double multiplier, std::string_view text) {
  if (open.empty()) {
    add_text(text);
    return;
  }
  multiply_from(open.back(), multiplier);
  open.pop_back();
}

void Parser::add_text(std::string_view text) {
  std::size_t part_begin = 0;
  for (std::size_t at = text.find(kBreak); at != std::string_view::npos; at = text.find(kBreak, at + 1)) {
    const std::size_t end = at + kBreak.size();
    if (at < part_begin || !word_boundary_before(text, at) || !word_boundary_after(text, end)) continue;
    // The match takes the spaces around the word, back to where the previous match ended.
    std::size_t begin = at, length = 0;
    while (begin > part_begin && is_python_space(unicode::decode_utf8_before(text, begin, length))) begin -= length;
    runs_.push_back({std::string(text.substr(part_begin, begin - part_begin))});
    runs_.push_back({"", 1.0, true});
    part_begin = skip_spaces(text, end);
  }
  runs_.push_back({std::string(text.substr(part_begin))});
}

void Parser::multiply_from(std::size_t first_run, double multiplier) {
  for (std::size_t i = first_run; i < runs_.size(); ++i) {
    if (!runs_[i].is_break) runs_[i].weight *= multiplier;
  }
}

void Parser::merge_equal_weights() {
  std::vector<PromptRun> merged;
  for (PromptRun& run : runs_) {
    if (!merged.empty() && !run.is_break && !merged.back().is_break && merged.back().weight == run.weight) {
      merged.back().text += run.text;
    } else {
      merged.push_back(std::move(run));
    }
  }
  runs_ = std::move(merged);
}

// The prompt tokens of each window and their weights.
struct WindowTokens {
  std::vector<std::vector<TokenId>> tokens{1};
  std::vector<std::vector<float>> weights{1};
};

// Windows being filled, as A1111's tokenize_line does.
class WindowFiller {
 public:
  WindowFiller(std::optional<TokenId> comma, std::size_t comma_backtrack) : comma_(comma), comma_backtrack_(comma_backtrack) {}

  void add(TokenId token, float weight);
  void next_window();
  // The windows; the last counts if it has tokens or is the only one.
  WindowTokens finish();

 private:
  std::optional<TokenId> comma_;
  std::size_t comma_backtrack_;
  WindowTokens windows_;
  std::optional<std::size_t> last_comma_;  // its position in the last window
};

void WindowFiller::add(TokenId token, float weight) {
  std::vector<TokenId>& tokens = windows_.tokens.back();
  std::vector<float>& weights = windows_.weights.back();
  if (token == comma_) {
    last_comma_ = tokens.size();
  } else if (comma_backtrack_ > 0 && tokens.size() == kClipWindowTokens && last_comma_ &&
             kClipWindowTokens - *last_comma_ <= comma_backtrack_) {
    // The words after the comma move on, so that the window ends at the comma.
    const auto cut = static_cast<std::ptrdiff_t>(*last_comma_ + 1);
    std::vector<TokenId> moved_tokens(tokens.begin() + cut, tokens.end());
    std::vector<float> moved_weights(weights.begin() + cut, weights.end());
    tokens.resize(static_cast<std::size_t>(cut));
    weights.resize(static_cast<std::size_t>(cut));
    next_window();
    windows_.tokens.back() = std::move(moved_tokens);
    windows_.weights.back() = std::move(moved_weights);
  }
  if (windows_.tokens.back().size() == kClipWindowTokens) next_window();
  windows_.tokens.back().push_back(token);
  windows_.weights.back().push_back(weight);
}

void WindowFiller::next_window() {
  windows_.tokens.emplace_back();
  windows_.weights.emplace_back();
  last_comma_.reset();
}

WindowTokens WindowFiller::finish() {
  if (windows_.tokens.back().empty() && windows_.tokens.size() > 1) {
    windows_.tokens.pop_back();
    windows_.weights.pop_back();
  }
  return std::move(windows_);
}

}  // namespace

std::vector<PromptRun> parse_prompt_weights(std::string_view prompt) { return Parser().parse(prompt); }

WeightedWindows tokenize_weighted(const ClipTokenizer& tokenizer, const std::vector<PromptRun>& runs,
                                  const WeightedWindowOptions& options) {
  WindowFiller filler(tokenizer.token_to_id(",</w>"), options.comma_backtrack);
  for (const PromptRun& run : runs) {
    if (run.is_break) {
      filler.next_window();
      continue;
    }
    for (const TokenId token : tokenizer.encode(run.text)) filler.add(token, static_cast<float>(run.weight));
  }
  const WindowTokens filled = filler.finish();

  WeightedWindows result{tokenizer.frame_chunks(filled.tokens, options.padding, options.max_windows), {}};
  for (std::size_t w = 0; w < result.clip.windows.size(); ++w) {
    std::array<float, kClipContextLength>& weights = result.weights.emplace_back();
    weights.fill(1.0f);
    std::copy(filled.weights[w].begin(), filled.weights[w].end(), weights.begin() + 1);
  }
  return result;
}

}  // namespace rf::stable_diffusion
