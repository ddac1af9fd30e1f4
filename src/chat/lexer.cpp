#include "chat/lexer.h"

#include <fmt/format.h>

#include <array>

#include "chat/source.h"
#include "chat/text.h"
#include "tokenizer/unicode.h"

namespace rf::jinja {
namespace {

bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Longest first, so that "//" wins over "/".
constexpr std::array<std::string_view, 25> kOperators = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                                         "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                                         "]",  "{",  "}",  ".",  ",",  ":",  "|"};

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source_(source) {}

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      const std::size_t open = find_tag(pos_);
      if (open == std::string_view::npos) {
        emit_text(source_.substr(pos_), pos_);
        break;
      }
      const char kind = source_[open + 1];
      const char sign = open + 2 < source_.size() ? source_[open + 2] : '\0';
      const bool has_sign = sign == '-' || sign == '+';
      emit_text(text_before(open, kind, has_sign ? sign : '\0'), pos_);
      pos_ = open + 2 + (has_sign ? 1 : 0);
      if (kind == '#') {
        skip_comment(open);
      } else {
        lex_tag(open, kind == '%');
      }
    }
    tokens_.push_back({Token::Kind::End, "", source_.size()});
    return std::move(tokens_);
  }

 private:
  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = source_.find('{', from); i != std::string_view::npos; i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) return i;
    }
    return std::string_view::npos;
  }

  // The text from pos_ up to a tag, after the tag's `-` or lstrip_blocks has trimmed it.
  std::string_view text_before(std::size_t open, char kind, char sign) const {
    std::string_view text = source_.substr(pos_, open - pos_);
    if (sign == '-') return trim_end(text);
    if (sign == '+' || kind == '{') return text;
    // lstrip_blocks: a block or comment tag alone on its line takes the line's indentation.
    const std::size_t line_start = text.rfind('\n') + 1;  // npos + 1 == 0
    const bool line_starting = pos_ == 0 || source_[pos_ - 1] == '\n';
    if ((line_start > 0 || line_starting) && trim_end(text.substr(line_start)).empty()) {
      return text.substr(0, line_start);
    }
    return text;
  }

  static std::string_view trim_end(std::string_view text) {
    const std::string trimmed = text::strip(text, text::Side::Right);
    return text.substr(0, trimmed.size());
  }

  void emit_text(std::string_view text, std::size_t offset) {
    if (!text.empty()) tokens_.push_back({Token::Kind::Text, std::string(text), offset});
  }

  // After a tag: `-` strips all following whitespace; otherwise trim_blocks eats one newline
  // after block and comment tags, unless the tag ends with `+`.
  void after_tag(char sign, bool trims_newline) {
    if (sign == '-') {
      for (std::size_t size = 0; pos_ < source_.size() && text::is_space(unicode::decode_utf8(source_, pos_, size));) {
        pos_ += size;
      }
    } else if (sign != '+' && trims_newline && pos_ < source_.size() && source_[pos_] == '\n') {
      ++pos_;
    }
  }

  char sign_before(std::size_t end, std::size_t content_start) const {
    return end > content_start && (source_[end - 1] == '-' || source_[end - 1] == '+') ? source_[end - 1] : '\0';
  }

  void skip_comment(std::size_t open) {
    const std::size_t end = source_.find("#}", pos_);
    if (end == std::string_view::npos) fail_at(source_, open, "unterminated comment");
    const char sign = sign_before(end, pos_);
    pos_ = end + 2;
    after_tag(sign, true);
  }

  void lex_tag(std::size_t open, bool is_block) {
    tokens_.push_back({is_block ? Token::Kind::BlockBegin : Token::Kind::VariableBegin, "", open});
    std::string closing_brackets;  // expected closers of open brackets; tags end only outside them
    while (true) {
      while (pos_ < source_.size() && is_tag_space(source_[pos_])) ++pos_;
      if (pos_ >= source_.size()) {
        fail_at(source_, open, is_block ? "unclosed tag: expected '%}'" : "unclosed expression: expected '}}'");
      }
      if (closing_brackets.empty() && close_tag(is_block)) return;
      lex_token(closing_brackets);
    }
  }

  bool close_tag(bool is_block) {
    const std::string_view rest = source_.substr(pos_);
    const std::string_view end = is_block ? "%}" : "}}";
    char sign = '\0';
    if ((rest.substr(1, 2) == end) && (rest[0] == '-' || (is_block && rest[0] == '+'))) {
      sign = rest[0];
    } else if (rest.substr(0, 2) != end) {
      return false;
    }
    tokens_.push_back({is_block ? Token::Kind::BlockEnd : Token::Kind::VariableEnd, "", pos_});
    pos_ += 2 + (sign ? 1 : 0);
    after_tag(sign, is_block);
    return true;
  }

  void lex_token(std::string& closing_brackets) {
    const std::size_t start = pos_;
    const char c = source_[pos_];
    if (is_name_start(c)) {
      while (pos_ < source_.size() && is_name_char(source_[pos_])) ++pos_;
      tokens_.push_back({Token::Kind::Name, std::string(source_.substr(start, pos_ - start)), start});
    } else if (is_digit(c)) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      tokens_.push_back({Token::Kind::String, lex_string(), start});
    } else {
      lex_operator(closing_brackets);
    }
  }

  void lex_number() {
    const std::size_t start = pos_;
    const auto digits = [&] {
      while (pos_ < source_.size() && is_digit(source_[pos_])) ++pos_;
    };
    const auto digit_at = [&](std::size_t i) { return i < source_.size() && is_digit(source_[i]); };
    digits();
    bool is_float = false;
    if (pos_ < source_.size() && source_[pos_] == '.' && digit_at(pos_ + 1)) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (pos_ < source_.size() && (source_[pos_] == 'e' || source_[pos_] == 'E')) {
      const std::size_t sign = pos_ + 1 < source_.size() && (source_[pos_ + 1] == '+' || source_[pos_ + 1] == '-');
      if (digit_at(pos_ + 1 + sign)) {
        pos_ += 1 + sign;
        digits();
        is_float = true;
      }
    }
    tokens_.push_back({is_float ? Token::Kind::Float : Token::Kind::Integer,
                       std::string(source_.substr(start, pos_ - start)), start});
  }

  // Python's escapes, as jinja2 decodes string literals; unknown escapes stay as written.
  std::string lex_string() {
    const std::size_t start = pos_;
    const char quote = source_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= source_.size()) fail_at(source_, start, "unterminated string");
      const char c = source_[pos_++];
      if (c == quote) return value;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= source_.size()) fail_at(source_, start, "unterminated string");
      const std::size_t escape_start = pos_ - 1;
      const char e = source_[pos_++];
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
        case '\'':
        case '"':
          value += e;
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
          unicode::append_utf8(value, hex_escape(2, escape_start));
          break;
        case 'u':
          unicode::append_utf8(value, hex_escape(4, escape_start));
          break;
        case 'U':
          unicode::append_utf8(value, hex_escape(8, escape_start));
          break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t code = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < source_.size() && source_[pos_] >= '0' && source_[pos_] <= '7'; ++i) {
              code = code * 8 + static_cast<char32_t>(source_[pos_++] - '0');
            }
            unicode::append_utf8(value, code);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
  }

  char32_t hex_escape(int digits, std::size_t escape_start) {
    char32_t code = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char h = pos_ < source_.size() ? source_[pos_] : '\0';
      const int digit = is_digit(h)              ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
      if (digit < 0) fail_at(source_, escape_start, "truncated escape sequence in string");
      code = code * 16 + static_cast<char32_t>(digit);
    }
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
      fail_at(source_, escape_start, "invalid code point in string escape");
    return code;
  }

  void lex_operator(std::string& closing_brackets) {
    for (const std::string_view op : kOperators) {
      if (source_.substr(pos_, op.size()) != op) continue;
      const char c = op[0];
      if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        closing_brackets += c == '(' ? ')' : c == '[' ? ']' : '}';
      } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (closing_brackets.empty() || closing_brackets.back() != c) {
          fail_at(source_, pos_, fmt::format("unexpected '{}'", c));
        }
        closing_brackets.pop_back();
      }
      tokens_.push_back({Token::Kind::Operator, std::string(op), pos_});
      pos_ += op.size();
      return;
    }
    std::size_t size = 0;
    unicode::decode_utf8(source_, pos_, size);
    fail_at(source_, pos_, fmt::format("unexpected character '{}'", source_.substr(pos_, size)));
  }

  std::string_view source_;
  std::size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace rf::jinja
