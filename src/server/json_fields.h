#pragma once
// Typed, range-checked reads of a request's JSON fields. A missing or null field is "not given";
// a field of the wrong type or out of range is a 400 naming it.
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

// The bytes of `text` as a JSON array of numbers (a token's bytes, in OpenAI's logprobs and
// llama-server's pieces).
json byte_array(const std::string& text);

// A 400 naming the first field of `body` not in `known`.
void refuse_unknown_fields(const json& body, std::initializer_list<std::string_view> known);

}  // namespace rf::server
