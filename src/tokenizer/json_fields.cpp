#include "tokenizer/json_fields.h"

#include "util/error.h"

namespace rf::json_fields {

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

Regex require_pattern(const json& object, const char* key, std::string_view what) {
  const json& pattern = require(object, key, what);
  if (pattern.is_object() && pattern.contains("String")) return Regex::literal(require_string(pattern, "String", what));
  if (pattern.is_object() && pattern.contains("Regex")) return Regex::pattern(require_string(pattern, "Regex", what));
  fail("{}: '{}' must be {{\"String\": ...}} or {{\"Regex\": ...}}", what, key);
}

const std::string& type_of(const json& object, std::string_view what) { return require_string(object, "type", what); }

}  // namespace rf::json_fields
