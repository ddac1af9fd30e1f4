#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "util/error.h"

namespace rf::unicode {

namespace {

// Well-formed UTF-8 byte sequences (Unicode table 3-7): the range allowed for the second byte
// depends on the lead byte; later bytes are plain continuation bytes.
struct LeadByte {
  std::size_t length;
  unsigned char second_min, second_max;
};

LeadByte lead_byte(unsigned char byte) {
  if (byte < 0x80) return {1, 0, 0};
  if (byte >= 0xC2 && byte <= 0xDF) return {2, 0x80, 0xBF};
  if (byte == 0xE0) return {3, 0xA0, 0xBF};
  if (byte == 0xED) return {3, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {3, 0x80, 0xBF};
  if (byte == 0xF0) return {4, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {4, 0x80, 0xBF};
  if (byte == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";

}  // namespace

Utf8Scan scan_utf8(std::string_view text, std::size_t pos) {
  const LeadByte lead = lead_byte(static_cast<unsigned char>(text[pos]));
  if (lead.length == 0) return {Utf8Scan::Invalid, 1};
  for (std::size_t i = 1; i < lead.length; ++i) {
    if (pos + i == text.size()) return {Utf8Scan::Truncated, i};
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    const bool allowed = i == 1 ? byte >= lead.second_min && byte <= lead.second_max : (byte & 0xC0) == 0x80;
    if (!allowed) return {Utf8Scan::Invalid, i};
  }
  return {Utf8Scan::Complete, lead.length};
}

char32_t decode_utf8(std::string_view text, std::size_t pos, std::size_t& length) {
  const Utf8Scan scan = scan_utf8(text, pos);
  length = scan.length;
  if (scan.status != Utf8Scan::Complete) return U'\uFFFD';
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (length == 1) return lead;
  char32_t code_point = lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) code_point = (code_point << 6) | (text[pos + i] & 0x3F);
  return code_point;
}

char32_t decode_utf8_before(std::string_view text, std::size_t end, std::size_t& length) {
  std::size_t begin = end - 1;
  while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  return decode_utf8(text, begin, length);
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Scan scan = scan_utf8(text, pos);
    if (scan.status != Utf8Scan::Complete) return false;
    pos += scan.length;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Scan scan = scan_utf8(text, pos);
    if (scan.status == Utf8Scan::Complete) {
      out.append(text.substr(pos, scan.length));
    } else {
      out += kReplacementCharacter;
    }
    pos += scan.length;
  }
  return out;
}

std::size_t truncated_tail_start(std::string_view text) {
  // A character is at most 4 bytes long, so only the last 3 bytes can begin a cut-off one.
  const std::size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (std::size_t pos = first; pos < text.size(); ++pos) {
    if (scan_utf8(text, pos).status == Utf8Scan::Truncated) return pos;
  }
  return text.size();
}

std::string normalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // every normal form leaves ASCII as it is

  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &mapped, static_cast<utf8proc_option_t>(options));
  if (length < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(length));
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0, length = 0; pos < text.size(); pos += length) {
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(decode_utf8(text, pos, length)))));
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_character(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;  // the joiners
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the other 68 bytes
// for U+0100 onwards, in byte order.
constexpr bool is_printable_latin1(unsigned byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct ByteLevelTables {
  std::array<std::string, 256> alphabet;
  std::array<int, 256 + 68> byte_of_code_point;  // -1 where a code point stands for no byte
};

ByteLevelTables make_byte_level_tables() {
  ByteLevelTables tables;
  tables.byte_of_code_point.fill(-1);
  char32_t next_substitute = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) {
    const char32_t code_point = is_printable_latin1(byte) ? byte : next_substitute++;
    append_utf8(tables.alphabet[byte], code_point);
    tables.byte_of_code_point[code_point] = static_cast<int>(byte);
  }
  return tables;
}

const ByteLevelTables& byte_level_tables() {
  static const ByteLevelTables tables = make_byte_level_tables();
  return tables;
}

}  // namespace

const std::array<std::string, 256>& byte_level_alphabet() { return byte_level_tables().alphabet; }

std::optional<unsigned char> byte_level_byte(char32_t code_point) {
  const auto& table = byte_level_tables().byte_of_code_point;
  if (code_point >= table.size() || table[code_point] < 0) return std::nullopt;
  return static_cast<unsigned char>(table[code_point]);
}

}  // namespace rf::unicode
