#include "chat/text.h"

#include <utf8proc.h>

#include <algorithm>

#include "chat/errors.h"
#include "chat/limits.h"
#include "tokenizer/unicode.h"

namespace rf::jinja::text {
namespace {

struct CodePoint {
  char32_t value;
  std::size_t begin, end;  // byte range in the string
};

std::vector<CodePoint> code_points(std::string_view s) {
  std::vector<CodePoint> out;
  for (std::size_t pos = 0, size = 0; pos < s.size(); pos += size) {
    const char32_t c = unicode::decode_utf8(s, pos, size);
    out.push_back({c, pos, pos + size});
  }
  return out;
}

bool is_cased(char32_t c) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL || category == UTF8PROC_CATEGORY_LT;
}

using CaseMap = utf8proc_int32_t (*)(utf8proc_int32_t);

void append_mapped(std::string& out, char32_t c, CaseMap map) {
  unicode::append_utf8(out, static_cast<char32_t>(map(static_cast<utf8proc_int32_t>(c))));
}

std::string map_all(std::string_view s, CaseMap map) {
  std::string out;
  out.reserve(s.size());
  for (const CodePoint& c : code_points(s)) append_mapped(out, c.value, map);
  return out;
}

}  // namespace

bool is_space(char32_t c) {
  switch (c) {
    case U' ':
    case U'\t':
    case U'\n':
    case U'\v':
    case U'\f':
    case U'\r':
    case 0x1c:
    case 0x1d:
    case 0x1e:
    case 0x1f:
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200a;
  }
}

std::size_t length(std::string_view s) { return code_points(s).size(); }

std::string strip(std::string_view s, Side side, std::optional<std::string_view> chars) {
  const std::vector<CodePoint> cps = code_points(s);
  std::vector<char32_t> strip_set;
  if (chars) {
    for (const CodePoint& c : code_points(*chars)) strip_set.push_back(c.value);
  }
  const auto strippable = [&](const CodePoint& c) {
    return chars ? std::find(strip_set.begin(), strip_set.end(), c.value) != strip_set.end() : is_space(c.value);
  };
  std::size_t first = 0, last = cps.size();
  if (side != Side::Right) {
    while (first < last && strippable(cps[first])) ++first;
  }
  if (side != Side::Left) {
    while (last > first && strippable(cps[last - 1])) --last;
  }
  if (first == last) return {};
  return std::string(s.substr(cps[first].begin, cps[last - 1].end - cps[first].begin));
}

std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep, long long maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    std::size_t start = 0;
    for (std::size_t found; (maxsplit < 0 || static_cast<long long>(parts.size()) < maxsplit) &&
                            (found = s.find(*sep, start)) != std::string_view::npos;
         start = found + sep->size()) {
      parts.emplace_back(s.substr(start, found - start));
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::vector<CodePoint> cps = code_points(s);
  std::size_t i = 0;
  while (true) {
    while (i < cps.size() && is_space(cps[i].value)) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<long long>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(cps[i].begin));
      break;
    }
    const std::size_t word_begin = cps[i].begin;
    while (i < cps.size() && !is_space(cps[i].value)) ++i;
    parts.emplace_back(s.substr(word_begin, (i < cps.size() ? cps[i].begin : s.size()) - word_begin));
  }
  return parts;
}

std::string replace(std::string_view s, std::string_view old_part, std::string_view new_part, long long count) {
  std::string out;
  if (old_part.empty()) {
    // Python inserts `new` before every character and at the end.
    long long done = 0;
    for (const CodePoint& c : code_points(s)) {
      if (count < 0 || done++ < count) out += new_part;
      out += s.substr(c.begin, c.end - c.begin);
      limits::check_bytes(out.size());
    }
    if (count < 0 || done < count) out += new_part;
    return out;
  }
  std::size_t start = 0;
  for (long long done = 0; count < 0 || done < count; ++done) {
    const std::size_t found = s.find(old_part, start);
    if (found == std::string_view::npos) break;
    out += s.substr(start, found - start);
    out += new_part;
    limits::check_bytes(out.size());
    start = found + old_part.size();
  }
  out += s.substr(start);
  return out;
}

std::string upper(std::string_view s) { return map_all(s, utf8proc_toupper); }
std::string lower(std::string_view s) { return map_all(s, utf8proc_tolower); }

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (const CodePoint& c : code_points(s)) {
    append_mapped(out, c.value, first ? utf8proc_totitle : utf8proc_tolower);
    first = false;
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (const CodePoint& c : code_points(s)) {
    append_mapped(out, c.value, previous_cased ? utf8proc_tolower : utf8proc_totitle);
    previous_cased = is_cased(c.value);
  }
  return out;
}

std::string title_words(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (const CodePoint& c : code_points(s)) {
    const bool separator = is_space(c.value) || c.value == U'-' || c.value == U'(' || c.value == U'{' ||
                           c.value == U'[' || c.value == U'<';
    if (separator) {
      out += s.substr(c.begin, c.end - c.begin);
    } else {
      append_mapped(out, c.value, word_start ? utf8proc_toupper : utf8proc_tolower);
    }
    word_start = separator;
  }
  return out;
}

}  // namespace rf::jinja::text
