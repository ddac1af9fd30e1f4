#include "server/structured_output.h"

#include "grammar/json_schema.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace {

using ordered_json = nlohmann::ordered_json;

std::string schema_grammar(const ordered_json& schema, const std::string& field) {
  try {
    return grammar::json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    bad_field(field, e.what());
  }
}

std::optional<GrammarRequest> response_format(const json& format, const ordered_json& ordered) {
  if (!format.is_object() || !format.contains("type")) bad_field("response_format", "must be an object with a 'type'");
  const json& type = format["type"];
  if (type == "text") return std::nullopt;
  if (type == "json_object") return GrammarRequest{"response_format", grammar::json_object_gbnf()};
  if (type != "json_schema") bad_field("response_format.type", "must be 'text', 'json_object' or 'json_schema'");
  const auto it = format.find("json_schema");
  if (it == format.end() || !it->is_object()) bad_field("response_format.json_schema", "must be an object");
  if (const auto name = it->find("name"); name != it->end() && !name->is_string()) {
    bad_field("response_format.json_schema.name", "must be a string");
  }
  if (const auto strict = it->find("strict"); strict != it->end() && !strict->is_boolean() && !strict->is_null()) {
    bad_field("response_format.json_schema.strict", "must be a boolean");
  }
  const auto& schema = ordered["response_format"]["json_schema"];
  if (!schema.contains("schema") || schema["schema"].is_null()) {
    return GrammarRequest{"response_format", grammar::json_object_gbnf()};  // no schema: any object
  }
  const std::string field = "response_format.json_schema.schema";
  return GrammarRequest{field, schema_grammar(schema["schema"], field)};
}

}  // namespace

std::optional<GrammarRequest> requested_grammar(const std::string& raw_body, const json& body) {
  auto given = [&](const char* name) { return body.contains(name) && !body[name].is_null(); };
  const int count = given("response_format") + given("grammar") + given("json_schema");
  if (count > 1) bad_field("response_format", "give one of response_format, grammar and json_schema, not several");
  if (count == 0) return std::nullopt;
  // Parsed again, keeping the order of object keys (parse_body has accepted it already).
  const auto ordered = ordered_json::parse(raw_body);
  if (given("response_format")) return response_format(body["response_format"], ordered);
  if (given("grammar")) {
    const auto text = string_field(body, "grammar");
    if (text->empty()) return std::nullopt;
    return GrammarRequest{"grammar", *text};
  }
  if (!body["json_schema"].is_object() && !body["json_schema"].is_boolean()) bad_field("json_schema", "must be a JSON schema object");
  return GrammarRequest{"json_schema", schema_grammar(ordered["json_schema"], "json_schema")};
}

}  // namespace rf::server
