#pragma once
// UTF-8 and Unicode helpers shared by the tokenizer stages.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace rf::unicode {

// What starts at a position of a byte string: a whole character, an ill-formed subsequence,
// or the valid beginning of a character that the end of the string cuts off.
struct Utf8Scan {
  enum Status { Complete, Invalid, Truncated } status;
  std::size_t length;  // bytes it spans; an ill-formed subsequence is as long as its valid prefix, at least 1
};
Utf8Scan scan_utf8(std::string_view text, std::size_t pos);

// The code point at `pos` (U+FFFD where the bytes are ill-formed); `length` receives its size.
char32_t decode_utf8(std::string_view text, std::size_t pos, std::size_t& length);
// The code point that ends at `end`, a character boundary of valid UTF-8 `text`.
char32_t decode_utf8_before(std::string_view text, std::size_t end, std::size_t& length);
void append_utf8(std::string& out, char32_t code_point);

bool is_valid_utf8(std::string_view text);
// Replaces each ill-formed subsequence by U+FFFD, as Rust's String::from_utf8_lossy does.
std::string to_valid_utf8(std::string_view text);
// Where a character cut off by the end of `text` begins (text.size() if none is).
std::size_t truncated_tail_start(std::string_view text);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view text, NormalForm form);
std::string to_lower(std::string_view text);

bool is_whitespace(char32_t c);    // the White_Space property, as Rust's char::is_whitespace
bool is_word_character(char32_t c);  // what \w matches: letters, marks, digits, connectors

// GPT-2's byte-level alphabet: every byte stands for a printable code point, so that BPE
// vocabularies never hold raw spaces or control bytes.
const std::array<std::string, 256>& byte_level_alphabet();  // byte -> its code point in UTF-8
std::optional<unsigned char> byte_level_byte(char32_t code_point);

}  // namespace rf::unicode
