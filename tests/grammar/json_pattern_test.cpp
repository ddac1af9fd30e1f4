#include "grammar/json_pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_stacks.h"
#include "grammar/matches.h"
#include "util/error.h"

namespace rf::grammar {
namespace {

using namespace std::string_literals;

// The reference regex runs on characters, not bytes (as JSON Schema's pattern does): on wide
// strings, whose wchar_t holds a whole code point here. A narrow std::regex would read "é+" as
// one byte and then a repeated second byte.
std::wstring widen(std::string_view utf8) {
  std::wstring out;
  for (std::size_t i = 0; i < utf8.size();) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    const auto length = std::min<std::size_t>(lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4, utf8.size() - i);
    char32_t c = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    out += static_cast<wchar_t>(c);
    i += length;
  }
  return out;
}

// The inside of a JSON string literal of `text` as a JSON writer spells it.
std::string json_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// The characters the inside of a JSON string literal stands for; none if it is not well-formed.
// \uXXXX gives the UTF-16 unit as it is (a lone surrogate stays one).
std::optional<std::wstring> json_unescape(std::string_view bytes) {
  std::string raw;  // the unescaped run awaiting UTF-8 decoding
  std::wstring out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x20 || c == '"') return std::nullopt;
    if (c != '\\') {
      raw += static_cast<char>(c);
      continue;
    }
    out += widen(raw);
    raw.clear();
    if (++i == bytes.size()) return std::nullopt;
    const std::string_view shorts = "\"\\/bfnrt", meant = "\"\\/\b\f\n\r\t";
    if (const auto k = shorts.find(bytes[i]); k != std::string_view::npos) {
      out += static_cast<wchar_t>(meant[k]);
    } else if (bytes[i] == 'u' && i + 4 < bytes.size()) {
      const std::string hex(bytes.substr(i + 1, 4));
      if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return std::nullopt;
      out += static_cast<wchar_t>(std::stoul(hex, nullptr, 16));
      i += 4;
    } else {
      return std::nullopt;
    }
  }
  return out + widen(raw);
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

struct Case {
  std::string pattern;
  std::vector<std::string> positives;  // hand-picked matches, mutated into near misses and more
  std::string reference = {};          // std::regex's spelling where it lacks a construct
};

// Patterns as JSON schemas write them, and corners of the syntax.
const std::vector<Case>& cases() {
  static const std::vector<Case> table = {
      {R"(^\d{3}-\d{4}$)", {"555-1234", "000-0000"}},
      {R"(^[A-Z]{2}\d{6}$)", {"AB123456", "ZZ000001"}},
      {R"(^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$)", {"john.doe@example.com", "a@b.cd", "x_1%+@q-r.org"}},
      {R"(^#[0-9a-fA-F]{6}$)", {"#a1B2c3", "#FFFFFF"}},
      {R"(^(foo|bar)+$)", {"foo", "barfoo", "foofoobar"}},
      {R"(ab+c)", {"abc", "xxabbbcyy", "\"abc\\"}},
      {R"(^a|b$)", {"a", "ab", "cb", "b", "a\"\n"}},
      {R"(^[^"\\]*$)", {"", "abc", "a b\n#"}},
      {R"(^["\\\s]+$)", {"\" \\\n", "\\", "\t\t\""}},
      {R"(^.{2,4}$)", {"ab", "a\"c\\", "\xC3\xA9\xC3\xA9x"}},
      {R"([^abc])", {"d", "abcx", "\"", "\n"}},
      {R"(^\D+$)", {"abc", "-#", "\"\\"}},
      {R"(^\W*$)", {"", "#-@ ", "\"\\\n"}},
      {R"(^\S+$)", {"abc", "\"x\\"}},
      {R"(^a{2,}$)", {"aa", "aaaaa"}},
      {R"(^a{0,3}b?$)", {"", "aab", "b", "aaa"}},
      {R"(^(a+?)(b*?)c??$)", {"a", "abbc", "aaab"}},
      {R"(^((ab|c)(d(e|f)?)*)+$)", {"ab", "abd", "cdedf", "abcde"}},
      {"^\xC3\xA9+$", {"\xC3\xA9", "\xC3\xA9\xC3\xA9\xC3\xA9"}},
      {R"(^\+?[1-9]\d{1,14}$)", {"+14155552671", "12"}},
      {R"(^\d{4}-\d{2}-\d{2}$)", {"2024-01-31", "0000-00-00"}},
      {R"(^[a-z0-9]+(?:-[a-z0-9]+)*$)", {"my-slug-1", "a", "a-b-c"}},
      {R"(^(?<year>\d{4})-(?<month>\d{2})$)", {"2024-05", "1999-12"}, R"(^(\d{4})-(\d{2})$)"},
      {R"(^[\w.-]+$)", {"a_b.c-d", "_", "..."}},
      {R"(^\s*$)", {"", " \t\n", "\r\f\v"}},
      {R"(^(\d+|\d+\.\d+)$)", {"12", "3.14"}},
      {R"("[^"]*")", {"say \"hi\" now", "\"\"", "\"\n\""}},
      {R"(\\)", {"a\\b", "\\"}},
      {R"(^a\nb$)", {"a\nb"}},
      {R"(^\x41\u0042[\x30-\x39]$)", {"AB5", "AB0"}},
      {R"(^$)", {""}},
      {R"(^(a|b?)+c$)", {"c", "abbc", "ac"}},
      {R"(^(a*)*b$)", {"b", "aab"}},
      {R"(^x{1,1000}$)", {"x", "xxxxxx", std::string(1000, 'x')}},
      {R"(^[^\d\s]+$)", {"ab#", "\"\\", "\xC3\xA9"}},
      {R"(^[\-\]\^\\]+$)", {"-]^\\", "^"}},
      {R"(^\.\*\+\?\(\)\[\]\{\}\|\/\$\^)", {".*+?()[]{}|/$^", ".*+?()[]{}|/$^ and on"}},
      {R"(colou?r)", {"color", "my colour!"}},
      {R"(^[A-Z][a-z]*( [A-Z][a-z]*)*$)", {"John Smith", "A B C"}},
      {R"(^\t\r\f\v\0\x7f$)", {"\t\r\f\v\0\x7f"s}},
      {R"(^\w+]}?$)", {"a]", "a_0]}"}},
      {R"(^[.]?[^]$)", {".\n", "\"", "a"}},
      {R"(^\u00e9\d|[\x00-\x1f]$)", {"\xC3\xA9" "5", "a\x01", "\b"}},
  };
  return table;
}

// Characters that strings are built from besides the pattern's own: JSON's escaped ones, word
// characters, spaces, punctuation, a non-ASCII letter, a no-break space.
const std::vector<std::string> kAlphabet = {"\"", "\\", " ", "\n", "\t", "\b", "\x01", "\x7F", "0", "1", "5", "9", "a",
                                            "b",  "c",  "z", "A",  "Z",  "#",  "-",    "_",    ".", "@", "\xC3\xA9",
                                            "\xC2\xA0"};

std::vector<std::string> characters_of(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    out.emplace_back(text.substr(i, length));
    i += length;
  }
  return out;
}

// Random strings for a case: some of its characters at random, and its positives edited a little.
std::vector<std::string> candidates(const Case& c, std::mt19937& rng) {
  std::vector<std::string> letters = characters_of(c.pattern);
  letters.insert(letters.end(), kAlphabet.begin(), kAlphabet.end());
  const auto pick = [&](const auto& v) -> const auto& { return v[rng() % v.size()]; };
  std::vector<std::string> out = c.positives;
  for (int n = 0; n < 400; ++n) {
    std::string text;
    for (std::size_t length = rng() % 10; length > 0; --length) text += pick(letters);
    out.push_back(text);
  }
  for (int n = 0; n < 400; ++n) {
    auto chars = characters_of(pick(c.positives));
    for (std::size_t edits = 1 + rng() % 2; edits > 0; --edits) {
      const std::size_t at = chars.empty() ? 0 : rng() % (chars.size() + 1);
      switch (rng() % 4) {
        case 0: chars.insert(chars.begin() + at, pick(letters)); break;
        case 1: if (at < chars.size()) chars.erase(chars.begin() + at); break;
        case 2: if (at < chars.size()) chars[at] = pick(letters); break;
        default: if (at < chars.size()) chars.insert(chars.begin() + at, chars[at]); break;  // a repeat
      }
    }
    std::string text;
    for (const auto& ch : chars) text += ch;
    out.push_back(text);
  }
  return out;
}

// A random member of the grammar's language, byte by byte among those it lets through; none if
// it has not ended within `limit` bytes.
std::optional<std::string> random_member(GrammarStacks& stacks, std::mt19937& rng, int limit) {
  auto state = stacks.initial();
  std::string out;
  for (int n = 0; n < limit; ++n) {
    if (stacks.accepts(state) && (!stacks.continues(state) || rng() % 4 == 0)) return out;
    std::vector<std::uint8_t> next;
    for (int b = 0; b < 256; ++b) {
      if (stacks.advance(state, static_cast<std::uint8_t>(b)) != GrammarStacks::kDead) next.push_back(static_cast<std::uint8_t>(b));
    }
    const std::uint8_t byte = next[rng() % next.size()];
    out += static_cast<char>(byte);
    state = stacks.advance(state, byte);
  }
  return stacks.accepts(state) ? std::optional(out) : std::nullopt;
}

unsigned seed() {
  const char* fixed = std::getenv("JSON_PATTERN_SEED");
  return fixed ? static_cast<unsigned>(std::strtoul(fixed, nullptr, 10)) : std::random_device{}();
}

TEST(JsonPattern, AgreesWithStdRegex) {
  const unsigned s = seed();
  std::printf("seed %u (set JSON_PATTERN_SEED to repeat)\n", s);
  std::mt19937 rng(s);
  ASSERT_GE(cases().size(), 30u);
  for (const Case& c : cases()) {
    const std::string expression = json_pattern_expression(c.pattern);
    const Grammar grammar = parse_gbnf("root ::= " + expression + "\n");
    const std::wregex regex(widen(c.reference.empty() ? c.pattern : c.reference), std::regex::ECMAScript);
    for (const auto& positive : c.positives) ASSERT_TRUE(std::regex_search(widen(positive), regex)) << c.pattern;
    std::size_t unsound = 0, missed = 0, matching = 0, tried = 0;
    for (const auto& text : candidates(c, rng)) {
      const bool in_regex = std::regex_search(widen(text), regex), in_grammar = matches(grammar, json_escape(text));
      ++tried;
      matching += in_regex;
      unsound += in_grammar && !in_regex;
      missed += in_regex && !in_grammar && is_ascii(text);
      EXPECT_FALSE(in_grammar && !in_regex) << c.pattern << " accepts " << json_escape(text) << "\n" << expression;
      EXPECT_FALSE(in_regex && !in_grammar && is_ascii(text)) << c.pattern << " misses " << json_escape(text) << "\n" << expression;
    }
    // The grammar's own strings, in whatever spelling it allows, must decode to matches.
    GrammarStacks stacks(grammar);
    for (int n = 0; n < 200; ++n) {
      const auto member = random_member(stacks, rng, 40);
      if (!member) continue;
      const auto decoded = json_unescape(*member);
      ++tried;
      unsound += !decoded || !std::regex_search(*decoded, regex);
      EXPECT_TRUE(decoded && std::regex_search(*decoded, regex)) << c.pattern << " accepts " << *member << "\n" << expression;
    }
    std::printf("%s: %zu unsound, %zu missed of %zu (%zu matching; tolerance 0)\n", c.pattern.c_str(), unsound, missed,
                tried, matching);
    EXPECT_GE(matching, 10u) << c.pattern << ": too few matching strings to judge completeness";
  }
}

TEST(JsonPattern, ExpressionIsOneGroupThatFitsInAStringRule) {
  const std::string expression = json_pattern_expression("^[a-z]+$");
  EXPECT_EQ(expression.front(), '(');
  EXPECT_EQ(expression.back(), ')');
  const Grammar grammar = parse_gbnf("root ::= \"\\\"\" " + expression + " \"\\\"\"\n");
  EXPECT_TRUE(matches(grammar, "\"abc\""));
  EXPECT_FALSE(matches(grammar, "\"ab1\""));
  EXPECT_FALSE(matches(grammar, "\"abc"));
}

TEST(JsonPattern, LargeCountsStayRepetitions) {
  const std::string expression = json_pattern_expression("^a{2,5000}b{7000}$");
  EXPECT_NE(expression.find("{2,5000}"), std::string::npos) << expression;
  EXPECT_NE(expression.find("{7000}"), std::string::npos) << expression;
  EXPECT_LT(expression.size(), 100u) << expression;
}

std::string error_of(std::string_view pattern) {
  return error_message([&] { json_pattern_expression(pattern); });
}

TEST(JsonPattern, RefusesWhatItCannotExpress) {
  EXPECT_NE(error_of(R"((a)\1)").find("back-reference"), std::string::npos) << error_of(R"((a)\1)");
  EXPECT_NE(error_of(R"((?<x>a)\k<x>)").find("back-reference"), std::string::npos);
  EXPECT_NE(error_of("a(?=b)").find("look-ahead"), std::string::npos);
  EXPECT_NE(error_of("a(?!b)").find("look-ahead"), std::string::npos);
  EXPECT_NE(error_of("(?<=a)b").find("look-behind"), std::string::npos);
  EXPECT_NE(error_of(R"(\bword)").find("word boundary"), std::string::npos);
  EXPECT_NE(error_of("a$b").find("anchor '$'"), std::string::npos) << error_of("a$b");
  EXPECT_NE(error_of("a^b").find("anchor '^'"), std::string::npos);
  EXPECT_NE(error_of("(^a)").find("anchor '^'"), std::string::npos);
  EXPECT_NE(error_of("(?i)abc").find("group '(?i'"), std::string::npos) << error_of("(?i)abc");
  EXPECT_NE(error_of("a**").find("follows another quantifier"), std::string::npos);
  EXPECT_NE(error_of("+a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of("a{2").find("not a repetition"), std::string::npos);
  EXPECT_NE(error_of("a{3,2}").find("maximum below its minimum"), std::string::npos);
  EXPECT_NE(error_of("a{20000}").find("above 10000"), std::string::npos);
  EXPECT_NE(error_of("[z-a]").find("backwards"), std::string::npos);
  EXPECT_NE(error_of(R"([\d-z])").find("shorthand"), std::string::npos);
  EXPECT_NE(error_of("[]").find("no character"), std::string::npos);
  EXPECT_NE(error_of("(ab").find("not closed"), std::string::npos);
  EXPECT_NE(error_of("[ab").find("not closed"), std::string::npos);
  EXPECT_NE(error_of("ab)").find("unmatched ')'"), std::string::npos);
  EXPECT_NE(error_of(R"(\q)").find("escape '\\q'"), std::string::npos);
  EXPECT_NE(error_of("\xF0\x9F\x98\x80").find("beyond U+FFFF"), std::string::npos);
}

}  // namespace
}  // namespace rf::grammar
