#pragma once
// Base64 as images travel in JSON (RFC 4648's standard alphabet, padded), through OpenSSL.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rf::server {

std::string base64_encode(std::span<const std::uint8_t> bytes);
// Padded standard base64; line breaks and spaces between groups are allowed, as MIME writes them.
// nullopt for anything else (another alphabet, missing padding, stray characters).
std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text);

}  // namespace rf::server
