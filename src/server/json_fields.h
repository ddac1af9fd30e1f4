#pragma once
// Typed, range-checked reads of a request's JSON fields. A missing or null field is "not given";
// a field of the wrong type or out of range is a 400 naming it.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rf::server {

using nlohmann::json;

// The request body as a JSON object (400 for anything else).
json parse_body(const std::string& body);

std::optional<double> number_field(const json& body, const char* name, double min, double max);
std::optional<long long> integer_field(const json& body, const char* name, long long min, long long max);
std::optional<bool> bool_field(const json& body, const char* name);
std::optional<std::string> string_field(const json& body, const char* name);
// A string or an array of strings, like OpenAI's "stop".
std::vector<std::string> strings_field(const json& body, const char* name, std::size_t max_items);

// An array of token ids (integers from 0); a 400 naming `field` for anything else. (The model's
// vocabulary is checked where they are used.)
std::vector<std::int32_t> token_ids_field(const json& ids, const std::string& field);

// A 400 naming `field`.
[[noreturn]] void bad_field(const std::string& field, const std::string& why);

// A message's content: a string, or an array of parts {"type": t, "text": "..."} with t among
// `types`, joined; a 400 naming the part for any other (these models read text only).
template <typename Json>
std::string text_content(const Json& content, const std::string& where, std::initializer_list<std::string_view> types) {
  if (content.is_string()) return content.template get<std::string>();
  if (!content.is_array()) bad_field(where, "must be a string or an array of content parts");
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const auto& part = content[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (std::find(types.begin(), types.end(), type) == types.end()) {
      std::string names;
      for (auto t : types) names += (names.empty() ? "" : " or ") + std::string(t);
      bad_field(at + ".type", "must be " + names + ": this model reads text only");
    }
    if (!part.contains("text") || !part["text"].is_string()) bad_field(at + ".text", "must be a string");
    text += part["text"].template get<std::string>();
  }
  return text;
}

// The bytes of `text` as a JSON array of numbers (a token's bytes, in OpenAI's logprobs and
// llama-server's pieces).
json byte_array(const std::string& text);

// A 400 naming the first field of `body` not in `known`.
void refuse_unknown_fields(const json& body, std::initializer_list<std::string_view> known);

}  // namespace rf::server
