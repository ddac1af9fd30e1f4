#include "server/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "server/api_error.h"

namespace rf::server {

void bad_field(const std::string& field, const std::string& why) {
  throw ApiError(400, fmt::format("'{}' {}", field, why), field);
}

std::vector<std::int32_t> token_ids_field(const json& ids, const std::string& field) {
  std::vector<std::int32_t> out;
  for (const auto& id : ids) {
    if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() > std::numeric_limits<std::int32_t>::max()) {
      bad_field(field, "holds something other than a token id (an integer from 0)");
    }
    out.push_back(static_cast<std::int32_t>(id.get<long long>()));
  }
  return out;
}

json byte_array(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(c);
  return bytes;
}

void refuse_unknown_fields(const json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : body.items()) {
    if (std::ranges::find(known, key) == known.end()) bad_field(key, "is not a field this request takes");
  }
}

json parse_body(const std::string& body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return parsed;
}

namespace {
const json* find(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}
}  // namespace

std::optional<double> number_field(const json& body, const char* name, double min, double max) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(name, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) bad_field(name, fmt::format("must be between {} and {}, got {}", min, max, x));
  return x;
}

std::optional<long long> integer_field(const json& body, const char* name, long long min, long long max) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad_field(name, "must be an integer");
  // Unsigned values above the signed range would wrap: check them as unsigned first.
  if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(max)) {
    bad_field(name, fmt::format("must be between {} and {}", min, max));
  }
  const long long x = v->get<long long>();
  if (x < min || x > max) bad_field(name, fmt::format("must be between {} and {}, got {}", min, max, x));
  return x;
}

std::optional<bool> bool_field(const json& body, const char* name) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(name, "must be true or false");
  return v->get<bool>();
}

std::optional<std::string> string_field(const json& body, const char* name) {
  const json* v = find(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_field(name, "must be a string");
  return v->get<std::string>();
}

std::vector<std::string> strings_field(const json& body, const char* name, std::size_t max_items) {
  const json* v = find(body, name);
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) bad_field(name, "must be a string or an array of strings");
  if (v->size() > max_items) bad_field(name, fmt::format("may hold at most {} strings", max_items));
  std::vector<std::string> out;
  for (const auto& item : *v) {
    if (!item.is_string()) bad_field(name, "must be a string or an array of strings");
    if (item.get_ref<const std::string&>().empty()) bad_field(name, "must not contain empty strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace rf::server
