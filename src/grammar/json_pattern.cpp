#include "grammar/json_pattern.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf::grammar {

namespace {

// Characters are code points up to U+FFFF without surrogates: one UTF-16 unit each, so ECMAScript
// (which counts units) and code-point engines read them alike.
using CharSet = std::vector<CodePointRange>;  // sorted, disjoint and not adjacent
constexpr char32_t kLastChar = 0xFFFF;
constexpr CodePointRange kSurrogates{0xD800, 0xDFFF};

CharSet normalized(const CharSet& ranges) { return normalized_code_points(ranges); }

CharSet unite(CharSet a, const CharSet& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalized(std::move(a));
}

// The characters not in `set`.
CharSet complement(const CharSet& set) {
  CharSet out;
  for (auto r : complement_code_points(normalized(set))) {
    if (r.first <= kLastChar) out.push_back({r.first, std::min(r.last, kLastChar)});
  }
  return out;
}

// The characters of `a` not in `b` (and no surrogate).
CharSet without(const CharSet& a, const CharSet& b) { return complement(unite(complement(a), b)); }

bool contains(const CharSet& set, char32_t c) {
  return std::any_of(set.begin(), set.end(), [c](auto r) { return r.first <= c && c <= r.last; });
}

const CharSet kDigits = {{'0', '9'}};
const CharSet kWordChars = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CharSet kAsciiSpaces = {{'\t', '\r'}, {' ', ' '}};
// ECMAScript's WhiteSpace and LineTerminator: what \s means there. std::regex and others take
// only the ASCII ones.
const CharSet kAllSpaces = {{'\t', '\r'}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CharSet kLineTerminators = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

// A shorthand class (\d \s \w and negations): `sure` where it adds characters, `possible` where a
// negated class removes them. They differ for \s and \S, whose non-ASCII spaces engines dispute.
struct Shorthand {
  CharSet sure, possible;
};

std::optional<Shorthand> shorthand(char letter) {
  switch (letter) {
    case 'd': return Shorthand{kDigits, kDigits};
    case 'D': return Shorthand{complement(kDigits), complement(kDigits)};
    case 'w': return Shorthand{kWordChars, kWordChars};
    case 'W': return Shorthand{complement(kWordChars), complement(kWordChars)};
    case 's': return Shorthand{kAsciiSpaces, kAllSpaces};
    case 'S': return Shorthand{complement(kAllSpaces), complement(kAsciiSpaces)};
    default: return std::nullopt;
  }
}

struct Node {
  enum class Kind : std::uint8_t { Chars, Sequence, Choice, Repeat };
  Kind kind = Kind::Sequence;
  CharSet chars;            // Chars: one of these
  std::vector<Node> parts;  // Sequence, Choice: in order; Repeat: the repeated node
  int min = 1, max = 1;     // Repeat; max < 0: no bound
};

Node chars_node(CharSet set) { return {Node::Kind::Chars, std::move(set), {}}; }

Node sequence_of(std::vector<Node> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  return {Node::Kind::Sequence, {}, std::move(parts)};
}

std::optional<Node> choice_of(std::vector<Node> parts) {
  if (parts.empty()) return std::nullopt;
  if (parts.size() == 1) return std::move(parts[0]);
  return Node{Node::Kind::Choice, {}, std::move(parts)};
}

// A top-level alternative, with whether ^ and $ anchor it.
struct Branch {
  Node body;
  bool at_start = false, at_end = false;
};

// The grammar's own repetition limit (gbnf.cpp).
constexpr int kMaxCount = 10000;

class PatternParser {
 public:
  explicit PatternParser(std::string_view pattern) : pattern_(pattern) {}

  std::vector<Branch> parse() && {
    std::vector<Branch> branches;
    do {
      Branch branch;
      branch.at_start = take('^');
      branch.body = parse_sequence(&branch.at_end);
      branches.push_back(std::move(branch));
    } while (take('|'));
    if (!at_end()) error("an unmatched ')'");
    return branches;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail("the pattern '{}' at offset {}: {}", pattern_, pos_, what);
  }

  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : '\0'; }
  bool take(char c) {
    if (at_end() || pattern_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // Atoms up to a '|', a ')' or the end. At the top level (`ends_anchored` given) a '$' before the
  // '|' or the end anchors the alternative; anchors anywhere else are refused.
  Node parse_sequence(bool* ends_anchored) {
    std::vector<Node> parts;
    while (!at_end() && peek() != '|' && peek() != ')') {
      const bool closes = pos_ + 1 == pattern_.size() || peek(1) == '|';
      if (ends_anchored && peek() == '$' && closes) {
        ++pos_;
        *ends_anchored = true;
        break;
      }
      if (peek() == '^' || peek() == '$') {
        error(fmt::format("the anchor '{}' is supported only at the start ('^') or end ('$') of a top-level alternative", peek()));
      }
      Node part = parse_quantifier(parse_atom());
      // An unquantified group's items join the sequence, so that literals merge across it.
      if (part.kind == Node::Kind::Sequence) {
        parts.insert(parts.end(), part.parts.begin(), part.parts.end());
      } else {
        parts.push_back(std::move(part));
      }
    }
    return sequence_of(std::move(parts));
  }

  Node parse_alternatives() {
    std::vector<Node> choices{parse_sequence(nullptr)};
    while (take('|')) choices.push_back(parse_sequence(nullptr));
    return *choice_of(std::move(choices));
  }

  Node parse_atom() {
    const char c = peek();
    if (c == '(') return parse_group();
    if (c == '[') return parse_class();
    if (take('.')) return chars_node(complement(kLineTerminators));
    if (const auto s = parse_shorthand()) return chars_node(s->sure);
    if (take('\\')) {
      const char32_t escaped = parse_escape(false);
      return chars_node({{escaped, escaped}});
    }
    if (c == '*' || c == '+' || c == '?') error(fmt::format("the quantifier '{}' has nothing to repeat", c));
    if (c == '{') error("a '{' with nothing to repeat (write '\\{' for the character)");
    const char32_t literal = parse_literal();
    return chars_node({{literal, literal}});
  }

  Node parse_group() {
    ++pos_;  // '('
    if (take('?')) {
      if (peek() == '=' || peek() == '!') error(fmt::format("look-ahead '(?{}' is not supported", peek()));
      if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
        error(fmt::format("look-behind '(?<{}' is not supported", peek(1)));
      }
      if (take('<')) {
        skip_group_name();
      } else if (!take(':')) {
        error(fmt::format("the group '(?{}' is not supported (only '(', '(?:' and '(?<name>')", peek()));
      }
    }
    Node inner = parse_alternatives();
    if (!take(')')) error("a group '(' is not closed");
    return inner;
  }

  void skip_group_name() {
    const std::size_t start = pos_;
    while (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '$') ++pos_;
    if (pos_ == start || !take('>')) error("a group name '(?<' is not an identifier closed by '>'");
  }

  Node parse_quantifier(Node atom) {
    int min = 0, max = -1;
    if (take('+')) {
      min = 1;
    } else if (take('?')) {
      max = 1;
    } else if (peek() == '{') {
      parse_counts(min, max);
    } else if (!take('*')) {
      return atom;
    }
    take('?');  // lazy: the same strings match
    const char next = peek();
    if (next == '*' || next == '+' || next == '?' || next == '{') {
      error(fmt::format("the quantifier '{}' follows another quantifier", next));
    }
    return {Node::Kind::Repeat, {}, {std::move(atom)}, min, max};
  }

  // {n}, {n,} or {n,m}.
  void parse_counts(int& min, int& max) {
    ++pos_;  // '{'
    const auto count = [&]() -> std::optional<int> {
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return std::nullopt;
      int value = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        value = value * 10 + (pattern_[pos_++] - '0');
        if (value > kMaxCount) error(fmt::format("a repetition count above {}", kMaxCount));
      }
      return value;
    };
    const auto low = count();
    std::optional<int> high = low;
    if (low && take(',')) high = peek() == '}' ? std::optional(-1) : count();
    if (!low || !high || !take('}')) {
      error("a '{' that is not a repetition {n}, {n,} or {n,m} (write '\\{' for the character)");
    }
    min = *low;
    max = *high;
    if (max >= 0 && max < min) error(fmt::format("the repetition {{{},{}}} has its maximum below its minimum", min, max));
  }

  // \d \D \w \W \s \S, taken if here.
  std::optional<Shorthand> parse_shorthand() {
    if (peek() != '\\') return std::nullopt;
    auto found = shorthand(peek(1));
    if (found) pos_ += 2;
    return found;
  }

  Node parse_class() {
    ++pos_;  // '['
    const bool negated = take('^');
    CharSet sure, possible;
    while (!take(']')) {
      if (at_end()) error("a class '[' is not closed");
      if (const auto s = parse_shorthand()) {
        sure = unite(std::move(sure), s->sure);
        possible = unite(std::move(possible), s->possible);
        if (peek() == '-' && peek(1) != ']') error("a class range with a shorthand such as '\\d' at an end");
        continue;
      }
      const char32_t first = parse_class_char();
      char32_t last = first;
      if (peek() == '-' && pos_ + 1 < pattern_.size() && peek(1) != ']') {
        ++pos_;
        if (peek() == '\\' && shorthand(peek(1))) error("a class range with a shorthand such as '\\d' at an end");
        last = parse_class_char();
        if (last < first) error("a class range runs backwards");
      }
      sure = unite(std::move(sure), {{first, last}});
      possible = unite(std::move(possible), {{first, last}});
    }
    // without(sure, {}) drops the surrogates a range such as [\0-\uFFFF] spans.
    CharSet set = negated ? complement(possible) : without(sure, {});
    if (set.empty()) error("a class that matches no character");
    return chars_node(std::move(set));
  }

  char32_t parse_class_char() { return take('\\') ? parse_escape(true) : parse_literal(); }

  // The character an escape stands for, the backslash taken.
  char32_t parse_escape(bool in_class) {
    if (at_end()) error("the pattern ends in a lone '\\'");
    const char c = pattern_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0':
        if (std::isdigit(static_cast<unsigned char>(peek()))) error("octal escapes such as '\\01' are not supported");
        return 0;
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'b':
        if (in_class) return '\b';
        error("the word boundary '\\b' is not supported");
      case 'B': error("the non-word boundary '\\B' is not supported");
      case 'k': error("the named back-reference '\\k' is not supported");
      case 'c': error("the control escape '\\c' is not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') error(fmt::format("the back-reference '\\{}' is not supported", c));
    // Punctuation stands for itself: \. \/ \- \" and the like.
    if (std::ispunct(static_cast<unsigned char>(c))) return static_cast<char32_t>(c);
    --pos_;
    error(fmt::format("the escape '\\{}' is not supported", c));
  }

  char32_t parse_hex(int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      if (!std::isxdigit(static_cast<unsigned char>(h))) error(fmt::format("expected {} hexadecimal digits", digits));
      value = value * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
    }
    if (value >= kSurrogates.first && value <= kSurrogates.last) error("a surrogate escape ('\\uD800' to '\\uDFFF')");
    return value;
  }

  // A character written as itself (UTF-8).
  char32_t parse_literal() {
    const auto scan = unicode::scan_utf8(pattern_, pos_);
    if (scan.status != unicode::Utf8Scan::Complete) error("the pattern is not valid UTF-8");
    std::size_t length = 0;
    const char32_t c = unicode::decode_utf8(pattern_, pos_, length);
    if (c > kLastChar) error("a character beyond U+FFFF (two UTF-16 units to ECMAScript)");
    pos_ += length;
    return c;
  }

  std::string_view pattern_;
  std::size_t pos_ = 0;
};

bool nullable(const Node& node) {
  switch (node.kind) {
    case Node::Kind::Chars: return false;
    case Node::Kind::Sequence: return std::all_of(node.parts.begin(), node.parts.end(), nullable);
    case Node::Kind::Choice: return std::any_of(node.parts.begin(), node.parts.end(), nullable);
    case Node::Kind::Repeat: return node.min == 0 || nullable(node.parts[0]);
  }
  return false;
}

// The node's strings but the empty one; none when it has no other.
std::optional<Node> without_empty(const Node& node) {
  if (!nullable(node)) return node;
  std::vector<Node> choices;
  switch (node.kind) {
    case Node::Kind::Sequence:  // every part may be empty: the first non-empty one, then the rest
      for (std::size_t i = 0; i < node.parts.size(); ++i) {
        if (auto first = without_empty(node.parts[i])) {
          std::vector<Node> parts{std::move(*first)};
          parts.insert(parts.end(), node.parts.begin() + static_cast<std::ptrdiff_t>(i) + 1, node.parts.end());
          choices.push_back(sequence_of(std::move(parts)));
        }
      }
      return choice_of(std::move(choices));
    case Node::Kind::Choice:
      for (const Node& part : node.parts) {
        if (auto kept = without_empty(part)) choices.push_back(std::move(*kept));
      }
      return choice_of(std::move(choices));
    case Node::Kind::Repeat: {
      auto item = node.max == 0 ? std::nullopt : without_empty(node.parts[0]);
      if (!item) return std::nullopt;
      return Node{Node::Kind::Repeat, {}, {std::move(*item)}, 1, node.max};
    }
    case Node::Kind::Chars: break;
  }
  return node;
}

// A character in GBNF's escapes, for one not printable ASCII.
std::string hex_escape(char32_t c) {
  if (c < 0x80) return fmt::format("\\x{:02X}", static_cast<unsigned>(c));
  if (c <= 0xFFFF) return fmt::format("\\u{:04X}", static_cast<unsigned>(c));
  return fmt::format("\\U{:08X}", static_cast<unsigned>(c));
}

std::string gbnf_literal(std::u32string_view text) {
  std::string out = "\"";
  for (char32_t c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else {
      out += c >= 0x20 && c < 0x7F ? std::string(1, static_cast<char>(c)) : hex_escape(c);
    }
  }
  return out + "\"";
}

std::string class_char(char32_t c) {
  if (c == ']' || c == '-' || c == '^' || c == '\\') return {'\\', static_cast<char>(c)};
  return c >= 0x20 && c < 0x7F ? std::string(1, static_cast<char>(c)) : hex_escape(c);
}

std::string gbnf_class(const CharSet& set, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (auto [first, last] : set) {
    out += class_char(first);
    if (last > first + 1) out += '-';
    if (last > first) out += class_char(last);
  }
  return out + "]";
}

// GBNF leaves surrogates out of every class, so a range may run across them.
CharSet across_surrogates(CharSet set) {
  for (std::size_t i = 0; i + 1 < set.size(); ++i) {
    if (set[i].last == kSurrogates.first - 1 && set[i + 1].first == kSurrogates.last + 1) {
      set[i].last = set[i + 1].last;
      set.erase(set.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      break;
    }
  }
  return set;
}

// One GBNF element for the characters of `set`, each written as itself.
std::string plain_expression(const CharSet& set) {
  if (set.size() == 1 && set[0].first == set[0].last) return gbnf_literal(std::u32string(1, set[0].first));
  // GBNF negates over all of Unicode: the negated form must exclude what lies beyond U+FFFF too.
  const CharSet outside = across_surrogates(unite(complement(set), {{kLastChar + 1, 0x10FFFF}}));
  const CharSet inside = across_surrogates(set);
  return outside.size() < inside.size() ? gbnf_class(outside, true) : gbnf_class(inside, false);
}

// What a JSON string may not hold as itself, and DEL, which the `char` rule of json_schema.cpp
// escapes too.
const CharSet kEscaped = {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};

// The two-character escapes, by the character they stand for.
constexpr std::pair<char32_t, char> kShortEscapes[] = {{'"', '"'},  {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'},
                                                       {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};

// Escaped as \u00XX: the controls without a short escape, DEL, and \b and \f, which JSON writers
// spell either way.
bool takes_hex_escape(char32_t c) { return (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7F; }

// The one way the character of a one-character set is written, where it has only one.
std::optional<std::u32string> single_spelling(const Node& node) {
  if (node.kind != Node::Kind::Chars || node.chars.size() != 1 || node.chars[0].first != node.chars[0].last) {
    return std::nullopt;
  }
  const char32_t c = node.chars[0].first;
  if (!contains(kEscaped, c)) return std::u32string(1, c);
  if (takes_hex_escape(c)) return std::nullopt;
  for (auto [escaped, letter] : kShortEscapes) {
    if (escaped == c) return std::u32string{U'\\', static_cast<char32_t>(letter)};
  }
  return std::nullopt;
}

// Alternatives writing the characters of `set` that JSON escapes: short escapes, then \u00XX
// grouped by the first hex digit, either letter case.
std::vector<std::string> escape_choices(const CharSet& set) {
  std::vector<std::string> choices;
  CharSet letters;
  for (auto [escaped, letter] : kShortEscapes) {
    if (contains(set, escaped)) letters.push_back({static_cast<char32_t>(letter), static_cast<char32_t>(letter)});
  }
  if (!letters.empty()) choices.push_back(R"("\\" )" + plain_expression(normalized(letters)));
  std::vector<std::string> by_high_digit;
  for (char32_t high : {0x00, 0x10, 0x70}) {
    CharSet low_digits;
    for (char32_t c = high; c < high + 16; ++c) {
      if (!takes_hex_escape(c) || !contains(set, c)) continue;
      for (const char digit : fmt::format("{:x}{:X}", static_cast<unsigned>(c & 0xF), static_cast<unsigned>(c & 0xF))) {
        low_digits.push_back({static_cast<char32_t>(digit), static_cast<char32_t>(digit)});
      }
    }
    if (low_digits.empty()) continue;
    by_high_digit.push_back(fmt::format("\"{:x}\" {}", static_cast<unsigned>(high >> 4), plain_expression(normalized(low_digits))));
  }
  if (by_high_digit.size() == 1) choices.push_back(R"("\\u00" )" + by_high_digit[0]);
  if (by_high_digit.size() > 1) choices.push_back(fmt::format(R"("\\u00" ({}))", fmt::join(by_high_digit, " | ")));
  return choices;
}

// One GBNF element (a literal, a class or a group) for one character of `set`, JSON-escaped.
std::string chars_expression(const CharSet& set) {
  const CharSet plain = without(set, kEscaped);
  std::vector<std::string> choices = escape_choices(set);
  if (choices.empty()) return plain_expression(plain);
  if (!plain.empty()) choices.insert(choices.begin(), plain_expression(plain));
  return fmt::format("({})", fmt::join(choices, " | "));
}

std::string expression(const Node& node);

// The node as one GBNF element, to put a quantifier on.
std::string operand(const Node& node) {
  const bool single = node.kind == Node::Kind::Chars || node.kind == Node::Kind::Choice;
  return single ? expression(node) : fmt::format("({})", expression(node));
}

std::string quantifier(int min, int max) {
  if (max < 0) return min == 0 ? "*" : min == 1 ? "+" : fmt::format("{{{},}}", min);
  if (min == 0 && max == 1) return "?";
  return min == max ? fmt::format("{{{}}}", min) : fmt::format("{{{},{}}}", min, max);
}

// The item is first stripped of the empty string: GBNF refuses a nullable item under * (as left
// recursion), and it would only add ways to match the same text.
std::string repeat_expression(const Node& node) {
  const Node& item = node.parts[0];
  const bool empty_item = nullable(item);
  const auto body = empty_item ? without_empty(item) : std::optional(item);
  if (!body || node.max == 0) return R"("")";
  const int min = empty_item ? 0 : node.min;
  if (min == 1 && node.max == 1) return expression(*body);
  return operand(*body) + quantifier(min, node.max);
}

std::string sequence_expression(const std::vector<Node>& parts) {
  std::vector<std::string> items;
  std::u32string run;  // characters with one spelling in a row, written as one literal
  for (const Node& part : parts) {
    if (const auto spelling = single_spelling(part)) {
      run += *spelling;
      continue;
    }
    if (!run.empty()) items.push_back(gbnf_literal(run));
    run.clear();
    items.push_back(expression(part));
  }
  if (!run.empty()) items.push_back(gbnf_literal(run));
  return items.empty() ? R"("")" : fmt::format("{}", fmt::join(items, " "));
}

std::string expression(const Node& node) {
  switch (node.kind) {
    case Node::Kind::Chars: return chars_expression(node.chars);
    case Node::Kind::Sequence: return sequence_expression(node.parts);
    case Node::Kind::Repeat: return repeat_expression(node);
    case Node::Kind::Choice: {
      std::vector<std::string> choices;
      for (const Node& part : node.parts) choices.push_back(expression(part));
      return fmt::format("({})", fmt::join(choices, " | "));
    }
  }
  return {};
}

// Any characters of a JSON string (the `char` rule of json_schema.cpp), for an unanchored side.
constexpr std::string_view kAnyChars = R"(([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))*)";

std::string branch_expression(const Branch& branch) {
  std::vector<std::string> items;
  if (!branch.at_start) items.emplace_back(kAnyChars);
  const bool empty_body = branch.body.kind == Node::Kind::Sequence && branch.body.parts.empty();
  if (!empty_body) items.push_back(expression(branch.body));
  // One run of any characters serves both sides of an empty body.
  if (!branch.at_end && (items.empty() || items.back() != kAnyChars)) items.emplace_back(kAnyChars);
  return items.empty() ? R"("")" : fmt::format("{}", fmt::join(items, " "));
}

}  // namespace

std::string json_pattern_expression(std::string_view pattern) {
  std::vector<std::string> choices;
  for (const Branch& branch : PatternParser(pattern).parse()) choices.push_back(branch_expression(branch));
  return fmt::format("({})", fmt::join(choices, " | "));
}

}  // namespace rf::grammar
