#include "server/base64.h"

#include <openssl/evp.h>

#include <climits>
#include <memory>

namespace rf::server {

std::string base64_encode(std::span<const std::uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  std::size_t written = 0;
  // EVP_EncodeBlock takes an int length: long inputs go in chunks of whole 3-byte groups.
  constexpr std::size_t kChunk = 3u << 20;
  for (std::size_t at = 0; at < bytes.size(); at += kChunk) {
    const std::size_t n = std::min(kChunk, bytes.size() - at);
    written += EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + written), bytes.data() + at, static_cast<int>(n));
  }
  out.resize(written);
  return out;
}

std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text) {
  std::string compact;
  compact.reserve(text.size());
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    compact.push_back(c);
  }
  if (compact.size() % 4 != 0 || compact.size() > INT_MAX) return std::nullopt;
  std::vector<std::uint8_t> out(compact.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(compact.data()),
                                static_cast<int>(compact.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's bytes as zeros; '=' may end the text only.
  const std::size_t pad = compact.ends_with("==") ? 2 : compact.ends_with("=") ? 1 : 0;
  if (compact.find('=') < compact.size() - pad) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

}  // namespace rf::server
