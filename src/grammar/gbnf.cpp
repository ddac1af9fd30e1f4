#include "grammar/gbnf.h"

#include <fmt/format.h>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Grammar parse() && {
    skip_space();
    if (at_end()) fail("the grammar is empty");
    while (!at_end()) {
      const std::string_view name = parse_name();
      skip_space();
      expect("::=");
      const auto rule = builder_.rule(name);
      if (builder_.defined(rule)) error(fmt::format("rule '{}' is defined twice", name));
      builder_.define(rule, parse_alternatives(name, false));
    }
    return std::move(builder_).build("root");
  }

 private:
  [[noreturn]] void error(std::string_view message) const {
    int line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      column = text_[i] == '\n' ? 1 : column + 1;
      line += text_[i] == '\n';
    }
    fail("grammar, line {} column {}: {}", line, column, message);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        return;
      }
    }
  }

  void expect(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) error(fmt::format("expected '{}'", token));
    pos_ += token.size();
  }

  std::string_view parse_name() {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return text_.substr(start, pos_ - start);
  }

  // Whether a new rule starts here (`name ::=`), which ends the rule before it.
  bool at_rule_start() const {
    std::size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  std::vector<Sequence> parse_alternatives(std::string_view rule_name, bool nested) {
    std::vector<Sequence> alternatives;
    while (true) {
      alternatives.push_back(parse_sequence(rule_name, nested));
      if (peek() != '|') return alternatives;
      ++pos_;
    }
  }

  Sequence parse_sequence(std::string_view rule_name, bool nested) {
    Sequence sequence;
    while (true) {
      skip_space();
      const char c = peek();
      if (at_end() || c == '|' || c == ')' || (!nested && at_rule_start())) break;
      Sequence item = parse_primary(rule_name);
      item = parse_postfix(std::move(item), rule_name);
      sequence.insert(sequence.end(), item.begin(), item.end());
    }
    if (nested && peek() != ')' && peek() != '|') error("expected ')'");
    return sequence;
  }

  Sequence parse_primary(std::string_view rule_name) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (peek() != '"') {
        if (at_end()) error("a string literal is not closed");
        append_char(bytes);
      }
      ++pos_;
      return builder_.literal(bytes);
    }
    if (c == '[') return {parse_class()};
    if (c == '.') {
      ++pos_;
      return {builder_.code_points({}, true)};
    }
    if (c == '(') {
      ++pos_;
      const auto group = builder_.helper(rule_name);
      builder_.define(group, parse_alternatives(rule_name, true));
      expect(")");
      return {builder_.reference(group)};
    }
    if (is_name_char(c)) return {builder_.reference(builder_.rule(parse_name()))};
    error(fmt::format("unexpected '{}'", c));
  }

  Sequence parse_postfix(Sequence item, std::string_view rule_name) {
    while (true) {
      const char c = peek();
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        item = builder_.repeat(item, c == '+' ? 1 : 0, c == '?' ? 1 : -1, rule_name);
      } else if (c == '{') {
        ++pos_;
        const int min = parse_count();
        int max = min;
        if (peek() == ',') {
          ++pos_;
          max = peek() == '}' ? -1 : parse_count();
        }
        expect("}");
        item = builder_.repeat(item, min, max, rule_name);
      } else {
        return item;
      }
    }
  }

  int parse_count() {
    skip_space();
    int value = 0;
    const std::size_t start = pos_;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + (text_[pos_++] - '0');
      if (value > 10000) error("a repetition count above 10000");
    }
    if (pos_ == start) error("expected a number");
    skip_space();
    return value;
  }

  Element parse_class() {
    ++pos_;  // '['
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    std::vector<CodePointRange> ranges;
    while (peek() != ']') {
      if (at_end()) error("a character class is not closed");
      const char32_t first = parse_code_point();
      char32_t last = first;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        last = parse_code_point();
        if (last < first) error("a character range runs backwards");
      }
      ranges.push_back({first, last});
    }
    ++pos_;
    return builder_.code_points(ranges, negated);
  }

  void append_char(std::string& out) { unicode::append_utf8(out, parse_code_point()); }

  // One character of a literal or class: an escape, or a UTF-8 encoded code point.
  char32_t parse_code_point() {
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (at_end()) error("an escape is cut off");
      const char e = text_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '.': return static_cast<char32_t>(e);
        default: --pos_; error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + n > text_.size()) error("the grammar is not valid UTF-8");
    char32_t code_point = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto next = static_cast<unsigned char>(text_[pos_ + i]);
      if ((next & 0xC0) != 0x80) error("the grammar is not valid UTF-8");
      code_point = (code_point << 6) | (next & 0x3F);
    }
    pos_ += n;
    return code_point;
  }

  char32_t parse_hex(int digits) {
    char32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int digit = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (digit < 0) error(fmt::format("expected {} hexadecimal digits", digits));
      value = value * 16 + static_cast<char32_t>(digit);
      ++pos_;
    }
    return value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  GrammarBuilder builder_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace rf::grammar
