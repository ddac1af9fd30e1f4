#pragma once
// The patterns of tokenizer.json: Oniguruma regular expressions (run with PCRE2, whose syntax
// agrees on everything tokenizers use: \p{L}, (?i:...), lookahead) or literal strings.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace rf {

class Regex {
 public:
  static Regex pattern(std::string_view expression);  // UTF-8 with Unicode properties
  static Regex literal(std::string_view text);        // matches the text itself, byte for byte

  struct Match {
    std::size_t begin, end;
  };
  // The non-overlapping matches from left to right (none in text that is not valid UTF-8,
  // unless the regex is a literal).
  std::vector<Match> find_all(std::string_view text) const;
  std::string replace_all(std::string_view text, std::string_view replacement) const;

 private:
  Regex() = default;
  struct FreeCode {
    void operator()(pcre2_real_code_8* code) const;
  };
  std::unique_ptr<pcre2_real_code_8, FreeCode> code_;  // null for a literal
  std::string literal_;
};

}  // namespace rf
