#include "tokenizer/decoders.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

namespace {

// The byte of a "<0xNN>" token.
std::optional<unsigned char> byte_of_token(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  unsigned value = 0;
  const auto [end, error] = std::from_chars(token.data() + 3, token.data() + 5, value, 16);
  if (error != std::errc() || end != token.data() + 5) return std::nullopt;
  return static_cast<unsigned char>(value);
}

// The token's bytes if every character is in the byte-level alphabet.
std::optional<std::string> byte_level_bytes(const std::string& token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t pos = 0, length = 0; pos < token.size(); pos += length) {
    const auto byte = unicode::byte_level_byte(unicode::decode_utf8(token, pos, length));
    if (!byte) return std::nullopt;
    bytes += static_cast<char>(*byte);
  }
  return bytes;
}

}  // namespace

void ByteLevelDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string text;
  for (const std::string& token : tokens) text += byte_level_bytes(token).value_or(token);
  tokens.assign(1, std::move(text));
}

void ByteFallbackDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::vector<std::string> decoded;
  decoded.reserve(tokens.size());
  bool previous_was_byte = false;
  for (std::string& token : tokens) {
    const auto byte = byte_of_token(token);
    if (byte && previous_was_byte) {
      decoded.back() += static_cast<char>(*byte);
    } else if (byte) {
      decoded.emplace_back(1, static_cast<char>(*byte));
    } else {
      decoded.push_back(std::move(token));
    }
    previous_was_byte = byte.has_value();
  }
  tokens = std::move(decoded);
}

void MetaspaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = replacement_.replace_all(tokens[i], i == 0 && drop_from_first_token_ ? "" : " ");
  }
}

void ReplaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
}

void StripDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) {
    std::string_view kept = token;
    for (std::size_t i = 0; i < start_ && kept.starts_with(content_); ++i) kept.remove_prefix(content_.size());
    for (std::size_t i = 0; i < stop_ && kept.ends_with(content_); ++i) kept.remove_suffix(content_.size());
    token = std::string(kept);
  }
}

void FuseDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string text;
  for (const std::string& token : tokens) text += token;
  tokens.assign(1, std::move(text));
}

void BpeSuffixDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = suffix_.replace_all(tokens[i], i + 1 == tokens.size() ? "" : " ");
  }
}

void DecoderSequence::decode_chain(std::vector<std::string>& tokens) const {
  for (const auto& step : steps_) step->decode_chain(tokens);
}

std::unique_ptr<Decoder> decoder_from_json(const nlohmann::json& config) {
  using namespace json_fields;
  if (config.is_null()) return nullptr;
  const std::string& type = type_of(config, "decoder");
  const std::string what = "decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Metaspace") {
    const std::string replacement = optional_string(config, "replacement", what).value_or("\u2581");
    const auto scheme = optional_string(config, "prepend_scheme", what);
    const bool prepends = scheme ? *scheme != "never" : bool_or(config, "add_prefix_space", true, what);
    return std::make_unique<MetaspaceDecoder>(replacement, prepends);
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(require_pattern(config, "pattern", what), require_string(config, "content", what));
  }
  if (type == "Strip") {
    const std::int64_t start = int_or(config, "start", 0, what), stop = int_or(config, "stop", 0, what);
    if (start < 0 || stop < 0) fail("{}: start and stop must not be negative", what);
    return std::make_unique<StripDecoder>(require_string(config, "content", what), start, stop);
  }
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(optional_string(config, "suffix", what).value_or("</w>"));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const auto& step : require_array(config, "decoders", what)) {
      if (auto decoder = decoder_from_json(step)) steps.push_back(std::move(decoder));
    }
    return std::make_unique<DecoderSequence>(std::move(steps));
  }
  fail("unsupported decoder type '{}'", type);
}

}  // namespace rf
