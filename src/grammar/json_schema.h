#pragma once
// JSON schemas as grammars, for structured output (OpenAI's response_format json_schema,
// llama-server's json_schema): every text the grammar allows is JSON that the schema validates.
//
// Taken: type (one or a list), properties, required, additionalProperties, items, minItems,
// maxItems, enum, const, anyOf, oneOf (as anyOf), allOf of one schema, $ref into $defs or
// definitions (recursion included), minLength, maxLength, pattern (json_pattern.h), format (date,
// time, date-time, duration, uuid, email, hostname, ipv4, ipv6), minimum, maximum,
// exclusiveMinimum and exclusiveMaximum (number_range.h), multipleOf of a whole number (up to
// 1000; with both bounds, at most 256 multiples between them), and the annotations that do not change
// what validates (title, description, default, ...).
// Any other keyword is refused by name rather than ignored.
//
// Where a schema allows more than it lists, the grammar takes a valid part of it: an object with
// properties has exactly those (in the schema's order, the optional ones optional), whatever
// additionalProperties says; numbers have at most 16 integral and 16 fractional digits and a
// two-digit exponent (bounded ones none), so that a model cannot run on forever (nor past a
// double's range); formats take their common shapes (an IPv6 address written out in full, a
// hostname of at most four labels, no 29th of February); whitespace between tokens is one space
// or a newline and up to 20 spaces or tabs.
#include <nlohmann/json_fwd.hpp>

#include <string>

namespace rf::grammar {

// GBNF (gbnf.h) for the schema; throws rf::Error naming what is not supported or not valid.
// `top_rule` names the rule of the whole schema: another name than root lets a grammar around
// it (tool calls' markers) use the schema's rules, which are lowercase words joined by '-'.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const std::string& top_rule = "root");

// GBNF for any JSON object (OpenAI's response_format json_object).
std::string json_object_gbnf();

}  // namespace rf::grammar
