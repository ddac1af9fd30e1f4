#include "tokenizer/json_fields.h"

#include <algorithm>

#include "util/error.h"

namespace rf::json_fields {

namespace {

// Ids above this are surely a corrupt file; refusing them keeps allocations sane.
constexpr std::int64_t kMaxTokenId = (1 << 24) - 1;

void set_token(std::vector<std::optional<std::string>>& tokens, std::string token, std::int64_t id, std::string_view what) {
  if (id < 0 || id > kMaxTokenId) fail("{}: {} is not a valid token id", what, id);
  if (static_cast<std::size_t>(id) >= tokens.size()) tokens.resize(id + 1);
  tokens[id] = std::move(token);
}

}  // namespace

bool VocabReader::start_object(std::size_t) {
  if (depth_++ > 0) not_an_id("an object");
  return true;
}
bool VocabReader::end_object() {
  --depth_;
  return true;
}
bool VocabReader::key(string_t& key) {
  key_ = std::move(key);
  return true;
}
bool VocabReader::number_integer(number_integer_t id) {
  set_token(tokens, std::move(key_), id, what_);
  return true;
}
bool VocabReader::number_unsigned(number_unsigned_t id) {
  if (id > static_cast<number_unsigned_t>(kMaxTokenId)) fail("{}: {} is not a valid token id", what_, id);
  return number_integer(static_cast<number_integer_t>(id));
}
bool VocabReader::null() { not_an_id("null"); }
bool VocabReader::boolean(bool value) { not_an_id(value ? "true" : "false"); }
bool VocabReader::number_float(number_float_t value, const string_t&) { not_an_id(json(value).dump()); }
bool VocabReader::string(string_t& value) { not_an_id(json(value).dump()); }
bool VocabReader::binary(binary_t&) { not_an_id("binary data"); }
bool VocabReader::start_array(std::size_t) { not_an_id("an array"); }
bool VocabReader::end_array() { not_an_id("an array"); }
bool VocabReader::parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
  fail("invalid JSON: {}", error.what());
}

void VocabReader::not_an_id(std::string_view value) const {
  if (depth_ == 0) fail("{} must be an object mapping tokens to ids, not {}", what_, value);
  fail("{}: {} is not a valid token id", what_, value);
}

const json& require_object(const json& value, std::string_view what) {
  if (!value.is_object()) fail("{} must be a JSON object, not {}", what, value.type_name());
  return value;
}

const json& require(const json& object, const char* key, std::string_view what) {
  const auto it = require_object(object, what).find(key);
  if (it == object.end()) fail("{} lacks the field '{}'", what, key);
  return *it;
}

const json& require_array(const json& object, const char* key, std::string_view what) {
  const json& value = require(object, key, what);
  if (!value.is_array()) fail("{}: '{}' must be an array, not {}", what, key, value.type_name());
  return value;
}

const std::string& require_string(const json& object, const char* key, std::string_view what) {
  const json& value = require(object, key, what);
  if (!value.is_string()) fail("{}: '{}' must be a string, not {}", what, key, value.type_name());
  return value.get_ref<const std::string&>();
}

std::optional<std::string> optional_string(const json& object, const char* key, std::string_view what) {
  const auto it = require_object(object, what).find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) fail("{}: '{}' must be a string, not {}", what, key, it->type_name());
  return it->get<std::string>();
}

bool bool_or(const json& object, const char* key, bool fallback, std::string_view what) {
  const auto it = require_object(object, what).find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail("{}: '{}' must be true or false, not {}", what, key, it->type_name());
  return it->get<bool>();
}

std::int64_t int_or(const json& object, const char* key, std::int64_t fallback, std::string_view what) {
  const auto it = require_object(object, what).find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) fail("{}: '{}' must be an integer, not {}", what, key, it->type_name());
  return it->get<std::int64_t>();
}

TokenId require_token_id(const json& value, std::string_view what) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 || value.get<std::int64_t>() > kMaxTokenId) {
    fail("{}: {} is not a valid token id", what, value.dump());
  }
  return value.get<TokenId>();
}

std::vector<std::optional<std::string>> require_vocab(const json& vocab, std::string_view what) {
  if (!vocab.is_object()) fail("{} must be an object mapping tokens to ids, not {}", what, vocab.type_name());
  std::vector<std::optional<std::string>> tokens;
  tokens.reserve(vocab.size());
  for (const auto& [token, id_value] : vocab.items()) set_token(tokens, token, require_token_id(id_value, what), what);
  return tokens;
}

std::vector<std::optional<std::string>> parse_vocab(std::string_view text, std::string_view what) {
  VocabReader reader(what);
  // Every entry has a colon: reserving for them all spares growing the table 16 times.
  reader.tokens.reserve(static_cast<std::size_t>(std::count(text.begin(), text.end(), ':')));
  json::sax_parse(text, &reader);
  return std::move(reader.tokens);
}

Regex require_pattern(const json& object, const char* key, std::string_view what) {
  const json& pattern = require(object, key, what);
  if (pattern.is_object() && pattern.contains("String")) return Regex::literal(require_string(pattern, "String", what));
  if (pattern.is_object() && pattern.contains("Regex")) return Regex::pattern(require_string(pattern, "Regex", what));
  fail("{}: '{}' must be {{\"String\": ...}} or {{\"Regex\": ...}}", what, key);
}

const std::string& type_of(const json& object, std::string_view what) { return require_string(object, "type", what); }

}  // namespace rf::json_fields
