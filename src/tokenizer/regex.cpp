#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

void Regex::FreeCode::operator()(pcre2_real_code_8* code) const { pcre2_code_free(code); }

Regex Regex::pattern(std::string_view expression) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expression.data()), expression.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    fail("invalid regex '{}' at offset {}: {}", expression, error_offset, reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where JIT is unavailable, matching falls back to the interpreter
  Regex regex;
  regex.code_.reset(code);
  return regex;
}

Regex Regex::literal(std::string_view text) {
  if (text.empty()) fail("empty literal pattern");
  Regex regex;
  regex.literal_ = text;
  return regex;
}

std::vector<Regex::Match> Regex::find_all(std::string_view text) const {
  std::vector<Match> matches;
  if (!code_) {
    for (std::size_t pos = text.find(literal_); pos != std::string_view::npos; pos = text.find(literal_, pos)) {
      matches.push_back({pos, pos + literal_.size()});
      pos += literal_.size();
    }
    return matches;
  }

  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
      pcre2_match_data_create_from_pattern(code_.get(), nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // The first call checks the whole subject's UTF-8; later calls need not check it again.
  std::uint32_t options = 0;
  for (std::size_t pos = 0; pos <= text.size();) {
    const int result = pcre2_match(code_.get(), subject, text.size(), pos, options, match_data.get(), nullptr);
    if (result == PCRE2_ERROR_NOMATCH || (result <= PCRE2_ERROR_UTF8_ERR1 && result >= PCRE2_ERROR_UTF8_ERR21)) break;
    if (result < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(result, message, sizeof message);
      fail("regex matching failed: {}", reinterpret_cast<const char*>(message));
    }
    options = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    matches.push_back({ovector[0], ovector[1]});
    if (ovector[1] > ovector[0]) {
      pos = ovector[1];
    } else if (ovector[1] < text.size()) {  // an empty match: go on after the next character
      pos = ovector[1] + unicode::scan_utf8(text, ovector[1]).length;
    } else {
      break;
    }
  }
  return matches;
}

std::string Regex::replace_all(std::string_view text, std::string_view replacement) const {
  std::string out;
  std::size_t copied = 0;
  for (const Match& match : find_all(text)) {
    out.append(text.substr(copied, match.begin - copied));
    out.append(replacement);
    copied = match.end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace rf
