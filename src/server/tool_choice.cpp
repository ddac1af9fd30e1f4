#include "server/tool_choice.h"

#include <algorithm>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::size_t kMaxTools = 128;

// OpenAI's rule for function names: 1 to 64 letters, digits, '_' and '-'.
bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
}

void check_optional(const json& object, const char* key, bool (json::*is_type)() const noexcept, const std::string& where,
                    const char* what) {
  const auto it = object.find(key);
  if (it != object.end() && !it->is_null() && !((*it).*is_type)()) bad_field(where + "." + key, what);
}

std::vector<std::string> checked_tools(const json& tools) {
  if (!tools.is_array()) bad_field("tools", "must be an array of tools");
  if (tools.size() > kMaxTools) bad_field("tools", fmt::format("may hold at most {} tools", kMaxTools));
  std::vector<std::string> names;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const std::string where = fmt::format("tools[{}]", i);
    const json& tool = tools[i];
    if (!tool.is_object()) bad_field(where, "must be an object");
    if (tool.value("type", json()) != "function") bad_field(where + ".type", "must be 'function'");
    const auto f = tool.find("function");
    if (f == tool.end() || !f->is_object()) bad_field(where + ".function", "must be an object");
    const auto name = f->find("name");
    if (name == f->end() || !name->is_string() || !valid_name(name->get<std::string>())) {
      bad_field(where + ".function.name", "must be 1 to 64 letters, digits, '_' or '-'");
    }
    if (std::find(names.begin(), names.end(), name->get<std::string>()) != names.end()) {
      bad_field(where + ".function.name", fmt::format("'{}' names two tools", name->get<std::string>()));
    }
    check_optional(*f, "description", &json::is_string, where + ".function", "must be a string");
    check_optional(*f, "parameters", &json::is_object, where + ".function", "must be a JSON schema object");
    check_optional(*f, "strict", &json::is_boolean, where + ".function", "must be a boolean");
    names.push_back(name->get<std::string>());
  }
  return names;
}

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}};
// the name of the one function required, "" for any, nullopt for none needed.
std::optional<std::string> required_call(const json& body, const std::vector<std::string>& names, bool& none) {
  const auto it = body.find("tool_choice");
  none = false;
  if (it == body.end() || it->is_null() || *it == "auto") return std::nullopt;
  if (*it == "none") {
    none = true;
    return std::nullopt;
  }
  if (*it == "required") return "";
  if (!it->is_object() || it->value("type", json()) != "function" || !it->contains("function") ||
      !(*it)["function"].is_object()) {
    bad_field("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  const auto name = (*it)["function"].find("name");
  if (name == (*it)["function"].end() || !name->is_string()) bad_field("tool_choice.function.name", "must be a string");
  if (std::find(names.begin(), names.end(), name->get<std::string>()) == names.end()) {
    bad_field("tool_choice.function.name", fmt::format("'{}' is not one of the tools", name->get<std::string>()));
  }
  return name->get<std::string>();
}

// Moves a tool's parameters into the shared $defs (under "t<index>"), with its own definitions
// beside them and its references pointed there, so that tools' schemas never see each other's.
void scope_references(ordered_json& schema, const std::string& scope) {
  if (schema.is_array()) {
    for (auto& item : schema) scope_references(item, scope);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (key != "$ref" || !value.is_string()) {
      scope_references(value, scope);
      continue;
    }
    const std::string ref = value.get<std::string>();
    if (ref == "#") value = "#/$defs/" + scope;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (ref.starts_with(prefix)) value = "#/$defs/" + scope + "-" + ref.substr(std::string_view(prefix).size());
    }
  }
}

ordered_json arguments_schema(ordered_json parameters, std::size_t index, ordered_json& defs) {
  if (parameters.is_null()) return {{"type", "object"}};
  if (parameters.dump().find("\"$ref\"") == std::string::npos) return parameters;
  const std::string scope = fmt::format("t{}", index);
  scope_references(parameters, scope);
  for (const char* section : {"$defs", "definitions"}) {
    if (!parameters.contains(section)) continue;
    for (auto& [key, value] : parameters[section].items()) defs[scope + "-" + key] = value;
    parameters.erase(section);
  }
  defs[scope] = std::move(parameters);
  return {{"$ref", "#/$defs/" + scope}};
}

// The JSON of one call of any of the offered functions (or of `only`), as `format` writes it.
ordered_json call_schema(const ordered_json& tools, const std::string& only, ToolCallFormat format, ordered_json& defs) {
  const char* arguments = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  ordered_json choices = ordered_json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const auto& f = tools[i]["function"];
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    choices.push_back({{"type", "object"},
                       {"properties", {{"name", {{"const", name}}}, {arguments, arguments_schema(f.value("parameters", ordered_json()), i, defs)}}},
                       {"required", {"name", arguments}},
                       {"additionalProperties", false}});
  }
  return choices.size() == 1 ? choices[0] : ordered_json{{"anyOf", choices}};
}

// GBNF for a reply of `format` that calls functions (or, `required` false, answers in text).
std::string reply_grammar(const ordered_json& tools, const std::string& only, bool required, bool parallel,
                          ToolCallFormat format) {
  ordered_json defs = ordered_json::object();
  ordered_json call = call_schema(tools, only, format, defs);
  const bool one = !parallel || !only.empty();
  auto with_defs = [&](ordered_json schema) {
    if (!defs.empty()) schema["$defs"] = defs;
    return schema;
  };
  auto list = [&](ordered_json items) {
    ordered_json schema = {{"type", "array"}, {"items", std::move(items)}, {"minItems", 1}};
    if (one) schema["maxItems"] = 1;
    return schema;
  };
  switch (format) {
    case ToolCallFormat::Hermes: {
      std::string gbnf = grammar::json_schema_to_gbnf(with_defs(call), "call");
      gbnf += R"(root ::= "<tool_call>\n" call "\n</tool_call>")";
      return gbnf + (one ? "\n" : " (\"\\n<tool_call>\\n\" call \"\\n</tool_call>\")*\n");
    }
    case ToolCallFormat::Mistral:  // after the [TOOL_CALLS] the prompt ends with
      return grammar::json_schema_to_gbnf(with_defs(list(call)));
    case ToolCallFormat::Llama3:  // its template takes one call a turn
      return grammar::json_schema_to_gbnf(with_defs(call));
    case ToolCallFormat::Generic: break;
  }
  ordered_json calls = {{"type", "object"}, {"properties", {{"tool_calls", list(call)}}}, {"required", {"tool_calls"}}};
  if (required) return grammar::json_schema_to_gbnf(with_defs(calls));
  ordered_json response = {{"type", "object"}, {"properties", {{"response", {{"type", "string"}}}}}, {"required", {"response"}}};
  return grammar::json_schema_to_gbnf(with_defs({{"anyOf", {calls, response}}}));
}

}  // namespace

std::optional<ToolUse> requested_tools(const std::string& raw_body, const json& body, ToolCallFormat format) {
  for (const char* old : {"functions", "function_call"}) {
    if (body.contains(old) && !body[old].is_null()) bad_field(old, "is deprecated and not taken: use 'tools' and 'tool_choice'");
  }
  const auto it = body.find("tools");
  const bool offered = it != body.end() && !it->is_null() && !(it->is_array() && it->empty());
  if (!offered) {
    const auto choice = body.find("tool_choice");
    if (choice != body.end() && !choice->is_null() && *choice != "none" && *choice != "auto") {
      bad_field("tool_choice", "asks for a tool call, but the request offers no tools");
    }
    return std::nullopt;
  }
  auto names = checked_tools(*it);
  ToolUse use{.format = format, .tools = ordered_json::parse(raw_body)["tools"], .names = std::move(names)};
  use.parallel = bool_field(body, "parallel_tool_calls").value_or(true);
  bool none = false;
  const auto only = required_call(body, use.names, none);
  if (none) return std::nullopt;
  if (only || format == ToolCallFormat::Generic) {
    try {
      use.gbnf = reply_grammar(use.tools, only.value_or(""), only.has_value(), use.parallel, format);
    } catch (const Error& e) {
      bad_field("tools", fmt::format("a tool's parameters cannot be held to: {}", e.what()));
    }
  }
  use.opened = only.has_value() && format == ToolCallFormat::Mistral;
  return use;
}

}  // namespace rf::server
