#include "grammar/json_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "grammar/json_pattern.h"
#include "grammar/number_range.h"
#include "util/error.h"

namespace rf::grammar {

namespace {

using json = nlohmann::ordered_json;

// The pieces every schema's grammar may use. Values end with `ws`, as in llama.cpp's json.gbnf.
const std::map<std::string, std::string>& primitive_rules() {
  static const std::map<std::string, std::string> rules = {
      {"ws", R"(| " " | "\n" [ \t]{0,20})"},
      {"char", R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))"},
      {"string", R"("\"" char* "\"" ws)"},
      {"integral", R"("-"? ("0" | [1-9] [0-9]{0,15}))"},
      {"integer", R"(integral ws)"},
      {"number", R"(integral ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws)"},
      {"boolean", R"(("true" | "false") ws)"},
      {"null", R"("null" ws)"},
      {"value", R"(object | array | string | number | boolean | null)"},
      {"object", R"("{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}" ws)"},
      {"array", R"("[" ws (value ("," ws value)*)? "]" ws)"},
      // Days that every year's month has (no 29th of February), as validators check them.
      {"date", R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))"},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
      {"date-time", R"(date "T" time)"},
      {"hex", R"([0-9a-fA-F])"},
      {"uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})"},
      // A letter or digit at each end of a label; hostnames of at most four labels of 41, within 253 bytes.
      {"label", R"([a-zA-Z0-9] ([a-zA-Z0-9-]{0,39} [a-zA-Z0-9])?)"},
      {"hostname", R"(label ("." label){0,3})"},
      {"email", R"([a-zA-Z0-9_+-]{1,32} ("." [a-zA-Z0-9_+-]{1,32}){0,3} "@" label ("." label){1,3})"},
      {"octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9]? [0-9])"},
      {"ipv4", R"(octet "." octet "." octet "." octet)"},
      {"ipv6", R"(hex{1,4} (":" hex{1,4}){7})"},
      {"duration-count", R"([0-9]{1,6})"},
      {"duration", R"("P" (duration-date ("T" duration-time)? | "T" duration-time | duration-count "W"))"},
      {"duration-date", R"(duration-count ("Y" (duration-count "M")? (duration-count "D")? | "M" (duration-count "D")? | "D"))"},
      {"duration-time", R"(duration-count ("H" (duration-count "M")? (duration-count "S")? | "M" (duration-count "S")? | "S"))"},
  };
  return rules;
}

// What each primitive needs besides itself.
const std::map<std::string, std::vector<std::string>>& primitive_dependencies() {
  static const std::map<std::string, std::vector<std::string>> needs = {
      {"string", {"char", "ws"}},
      {"integer", {"integral", "ws"}},
      {"number", {"integral", "ws"}},
      {"boolean", {"ws"}},
      {"null", {"ws"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}},
      {"array", {"ws", "value"}},
      {"date-time", {"date", "time"}},
      {"uuid", {"hex"}},
      {"hostname", {"label"}},
      {"email", {"label"}},
      {"ipv4", {"octet"}},
      {"ipv6", {"hex"}},
      {"duration", {"duration-count", "duration-date", "duration-time"}},
      {"duration-date", {"duration-count"}},
      {"duration-time", {"duration-count"}},
  };
  return needs;
}

// Keywords that do not change which instances validate.
const std::set<std::string>& annotations() {
  static const std::set<std::string> keys = {"title", "description", "default", "examples", "$schema", "$id",
                                             "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                             "definitions"};
  return keys;
}

// A GBNF string literal of these bytes.
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string json_literal(const json& value) { return literal(value.dump(-1, ' ', false)) + " ws"; }

// Integers take at most 16 digits, as number_range.h's grammars write them.
constexpr double kLargestInteger = 1e16;

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  std::string compile(const std::string& top_rule) && {
    const auto expression = visit(root_, "schema", "schema");
    if (rules_.contains(top_rule)) fail("'{}' cannot name a JSON schema's grammar: a rule of it has that name", top_rule);
    rules_[top_rule] = expression;
    std::string text;
    for (const auto& [name, body] : rules_) text += fmt::format("{} ::= {}\n", name, body);
    return text;
  }

 private:
  [[noreturn]] static void unsupported(const std::string& where, std::string_view what) {
    fail("the JSON schema at '{}': {}", where, what);
  }

  // The name of a primitive rule, adding it (and what it needs) to the grammar.
  std::string primitive(const std::string& name) {
    if (rules_.contains(name)) return name;
    rules_[name] = primitive_rules().at(name);
    if (const auto it = primitive_dependencies().find(name); it != primitive_dependencies().end()) {
      for (const auto& needed : it->second) primitive(needed);
    }
    return name;
  }

  // A new rule named after `base`, holding `body`.
  std::string add_rule(const std::string& base, std::string body) {
    std::string name;
    for (char c : base) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (primitive_rules().contains(name) || rules_.contains(name)) {
      int n = 1;
      while (rules_.contains(fmt::format("{}-{}", name, n))) ++n;
      name = fmt::format("{}-{}", name, n);
    }
    rules_[name] = std::move(body);
    return name;
  }

  // An expression matching the schema's instances (with trailing ws).
  std::string visit(const json& schema, const std::string& base, const std::string& where) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) unsupported(where, "false allows nothing");
      return primitive("value");
    }
    if (!schema.is_object()) unsupported(where, "a schema must be an object or a boolean");
    check_keywords(schema, where);
    if (const auto ref = schema.find("$ref"); ref != schema.end()) return reference(*ref, where);
    if (const auto it = schema.find("const"); it != schema.end()) return json_literal(*it);
    if (const auto it = schema.find("enum"); it != schema.end()) return enumeration(*it, where);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const auto it = schema.find(key); it != schema.end()) return alternatives(*it, base, where + "/" + key);
    }
    if (const auto it = schema.find("allOf"); it != schema.end()) {
      if (!it->is_array() || it->size() != 1) unsupported(where, "allOf is taken only with a single schema");
      return visit((*it)[0], base, where + "/allOf/0");
    }
    const auto type = schema.find("type");
    if (type == schema.end()) {
      if (schema.contains("properties")) return object(schema, base, where);
      if (schema.contains("items")) return array(schema, base, where);
      return primitive("value");
    }
    if (type->is_array()) {
      std::vector<std::string> choices;
      for (const auto& one : *type) choices.push_back(typed(schema, one, base, where));
      return fmt::format("({})", fmt::join(choices, " | "));
    }
    return typed(schema, *type, base, where);
  }

  void check_keywords(const json& schema, const std::string& where) {
    static const std::set<std::string> taken = {"type", "properties", "required", "additionalProperties", "items",
                                                "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf",
                                                "$ref", "minLength", "maxLength", "format", "minimum", "maximum",
                                                "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "pattern"};
    for (const auto& [key, value] : schema.items()) {
      if (!taken.contains(key) && !annotations().contains(key)) {
        unsupported(where, fmt::format("the keyword '{}' is not supported in structured output", key));
      }
    }
  }

  std::string typed(const json& schema, const json& type, const std::string& base, const std::string& where) {
    if (!type.is_string()) unsupported(where, "type must be a string or a list of strings");
    const auto name = type.get<std::string>();
    if (name == "object") return object(schema, base, where);
    if (name == "array") return array(schema, base, where);
    if (name == "string") return string(schema, base, where);
    if (name == "integer") return integer(schema, base, where);
    if (name == "number" && schema.contains("multipleOf")) return multiples(schema, base, where);
    if (name == "number" && bounded(schema)) return number(schema, base, where);
    if (name == "number" || name == "boolean" || name == "null") return primitive(name);
    unsupported(where, fmt::format("unknown type '{}'", name));
  }

  std::string reference(const json& ref, const std::string& where) {
    if (!ref.is_string()) unsupported(where, "$ref must be a string");
    const auto path = ref.get<std::string>();
    if (const auto it = references_.find(path); it != references_.end()) return it->second;
    std::string key;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (path.starts_with(prefix)) key = path.substr(std::string_view(prefix).size());
    }
    const std::string section = path.starts_with("#/$defs/") ? "$defs" : "definitions";
    if (key.empty() || !root_.contains(section) || !root_[section].contains(key)) {
      unsupported(where, fmt::format("$ref '{}' is not a definition in this schema's $defs", path));
    }
    // Named before it is compiled, so that a definition may refer to itself.
    const std::string name = add_rule("def-" + key, "");
    references_[path] = name;
    rules_[name] = visit(root_[section][key], name, path.substr(1));
    return name;
  }

  std::string enumeration(const json& values, const std::string& where) {
    if (!values.is_array() || values.empty()) unsupported(where, "enum must be a non-empty list");
    std::vector<std::string> choices;
    for (const auto& v : values) choices.push_back(json_literal(v));
    return fmt::format("({})", fmt::join(choices, " | "));
  }

  std::string alternatives(const json& schemas, const std::string& base, const std::string& where) {
    if (!schemas.is_array() || schemas.empty()) unsupported(where, "must be a non-empty list of schemas");
    std::vector<std::string> choices;
    for (std::size_t i = 0; i < schemas.size(); ++i) {
      choices.push_back(visit(schemas[i], fmt::format("{}-{}", base, i), fmt::format("{}/{}", where, i)));
    }
    return fmt::format("({})", fmt::join(choices, " | "));
  }

  static std::optional<int> count(const json& schema, const char* key, const std::string& where) {
    const auto it = schema.find(key);
    if (it == schema.end()) return std::nullopt;
    if (!it->is_number_integer() || it->get<long long>() < 0 || it->get<long long>() > 10000) unsupported(where, fmt::format("{} must be an integer from 0 to 10000", key));
    return it->get<int>();
  }

  // "{min,max}" for GBNF, or a plain * / +.
  static std::string repetition(int min, std::optional<int> max) {
    if (!max) return min == 0 ? "*" : min == 1 ? "+" : fmt::format("{{{},}}", min);
    return fmt::format("{{{},{}}}", min, *max);
  }

  std::string string(const json& schema, const std::string& base, const std::string& where) {
    if (const auto it = schema.find("pattern"); it != schema.end()) {
      for (const char* other : {"format", "minLength", "maxLength"}) {
        if (schema.contains(other)) unsupported(where, fmt::format("pattern is not supported together with {}", other));
      }
      if (!it->is_string()) unsupported(where, "pattern must be a string");
      std::string expression;
      try {
        expression = json_pattern_expression(it->get<std::string>());
      } catch (const Error& e) {
        unsupported(where, e.what());
      }
      primitive("ws");
      return add_rule(base, fmt::format("\"\\\"\" {} \"\\\"\" ws", expression));
    }
    if (const auto it = schema.find("format"); it != schema.end()) {
      const auto format = it->is_string() ? it->get<std::string>() : "";
      static const std::set<std::string> formats = {"date", "time", "date-time", "duration", "uuid",
                                                    "email", "hostname", "ipv4", "ipv6"};
      if (!formats.contains(format)) {
        unsupported(where, fmt::format("format {} is not supported (date, time, date-time, duration, uuid, email, "
                                       "hostname, ipv4 and ipv6 are)", it->dump()));
      }
      primitive("ws");
      return fmt::format("\"\\\"\" {} \"\\\"\" ws", primitive(format));
    }
    const int min = count(schema, "minLength", where).value_or(0);
    const auto max = count(schema, "maxLength", where);
    if (min == 0 && !max) return primitive("string");
    if (max && *max < min) unsupported(where, "maxLength is below minLength");
    primitive("char");
    primitive("ws");
    return add_rule(base, fmt::format("\"\\\"\" char{} \"\\\"\" ws", repetition(min, max)));
  }

  static bool bounded(const json& schema) {
    return schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") ||
           schema.contains("exclusiveMaximum");
  }

  // The tightest integer bound the keywords give (a lower one when `lower`).
  static std::optional<long long> integer_bound(const json& schema, bool lower, const std::string& where) {
    std::optional<long long> bound;
    for (const bool exclusive : {false, true}) {
      const char* key = bound_keyword(lower, exclusive);
      const auto it = schema.find(key);
      if (it == schema.end()) continue;
      if (!it->is_number() || std::abs(it->get<double>()) >= kLargestInteger) {
        unsupported(where, fmt::format("{} must be a number of at most 16 digits", key));
      }
      const double v = it->get<double>();
      const auto b = static_cast<long long>(lower ? (exclusive ? std::floor(v) + 1 : std::ceil(v))
                                                  : (exclusive ? std::ceil(v) - 1 : std::floor(v)));
      bound = !bound ? b : lower ? std::max(*bound, b) : std::min(*bound, b);
    }
    return bound;
  }

  static const char* bound_keyword(bool lower, bool exclusive) {
    return lower ? (exclusive ? "exclusiveMinimum" : "minimum") : (exclusive ? "exclusiveMaximum" : "maximum");
  }

  // The tightest bound of a number (a lower one when `lower`), compared by its decimal digits.
  static std::optional<NumberBound> number_bound(const json& schema, bool lower, const std::string& where) {
    std::optional<NumberBound> bound;
    for (const bool exclusive : {false, true}) {
      const char* key = bound_keyword(lower, exclusive);
      const auto it = schema.find(key);
      if (it == schema.end()) continue;
      if (!it->is_number()) unsupported(where, fmt::format("{} must be a number", key));
      const NumberBound b{parse_decimal(it->dump()), exclusive};
      if (!bound || tighter(b, *bound, lower)) bound = b;
    }
    return bound;
  }

  // Whether `a` allows fewer numbers than `b` (both lower bounds when `lower`).
  static bool tighter(const NumberBound& a, const NumberBound& b, bool lower) {
    if (const int c = compare(a.value, b.value)) return lower ? c > 0 : c < 0;
    return a.exclusive && !b.exclusive;
  }

  // An integer within the schema's bounds, the digits spelled out range by range.
  std::string integer(const json& schema, const std::string& base, const std::string& where) {
    if (schema.contains("multipleOf")) return multiples(schema, base, where);
    if (!bounded(schema)) return primitive("integer");
    const auto range = integer_range(integer_bound(schema, true, where), integer_bound(schema, false, where));
    if (!range) unsupported(where, "no integer lies within its minimum and maximum");
    primitive("ws");
    return add_rule(base, fmt::format("({}) ws", *range));
  }

  static constexpr long long kMaxStep = 1000, kMaxListedMultiples = 256;

  // Integers that are multiples of a whole multipleOf: listed one by one within bounds, else read
  // digit by digit, each rule a remainder so far (a number mod n is (10 r + digit) mod n).
  std::string multiples(const json& schema, const std::string& base, const std::string& where) {
    const auto step_it = schema.find("multipleOf");
    if (!step_it->is_number() || step_it->get<double>() <= 0 || step_it->get<double>() != std::floor(step_it->get<double>()) ||
        step_it->get<double>() > kMaxStep) {
      unsupported(where, fmt::format("multipleOf is supported as a whole number from 1 to {}", kMaxStep));
    }
    const auto step = static_cast<long long>(step_it->get<double>());
    primitive("ws");
    const auto low = integer_bound(schema, true, where), high = integer_bound(schema, false, where);
    // From 0 or the first positive multiple up, the digits below hold without a sign.
    const bool from_zero = low && !high && *low >= 0 && *low <= step;
    if ((low || high) && !from_zero) {
      if (!low || !high || (*high - *low) / step > kMaxListedMultiples) {
        unsupported(where, fmt::format("multipleOf is supported with no bound, a minimum from 0 to the multiple, or "
                                       "both bounds with at most {} multiples between them", kMaxListedMultiples));
      }
      std::vector<std::string> listed;
      for (long long v = (*low + (*low > 0 ? step - 1 : 0)) / step * step; v <= *high; v += step) {
        if (v >= *low) listed.push_back(fmt::format("\"{}\"", v));
      }
      if (listed.empty()) unsupported(where, "no multiple of multipleOf lies within its minimum and maximum");
      return add_rule(base, fmt::format("({}) ws", fmt::join(listed, " | ")));
    }
    std::vector<std::string> states;  // named before written: they refer to each other
    for (long long r = 0; r < step; ++r) states.push_back(add_rule(fmt::format("{}-mod-{}", base, r), ""));
    // The digits that take remainder r to each next one, as a class.
    auto moves = [&](long long r, int first_digit) {
      std::map<long long, std::string> digits;
      for (int d = first_digit; d <= 9; ++d) digits[(10 * r + d) % step] += static_cast<char>('0' + d);
      std::vector<std::string> out;
      for (const auto& [next, set] : digits) out.push_back(fmt::format("[{}] {}", set, states[next]));
      return fmt::format("{}", fmt::join(out, " | "));
    };
    for (long long r = 0; r < step; ++r) rules_[states[r]] = (r == 0 ? "\"\" | " : "") + moves(r, 0);
    const std::string zero = !low || *low == 0 ? "\"0\" | " : "";
    return add_rule(base, fmt::format("({}{}({})) ws", zero, from_zero ? "" : "\"-\"? ", moves(0, 1)));
  }

  // A number within the schema's bounds, written without an exponent.
  std::string number(const json& schema, const std::string& base, const std::string& where) {
    std::optional<std::string> range;
    try {
      range = number_range(number_bound(schema, true, where), number_bound(schema, false, where));
    } catch (const Error& e) {
      unsupported(where, e.what());
    }
    if (!range) unsupported(where, "no number lies within its minimum and maximum");
    primitive("ws");
    return add_rule(base, fmt::format("({}) ws", *range));
  }

  std::string array(const json& schema, const std::string& base, const std::string& where) {
    const auto items_it = schema.find("items");
    const std::string item = items_it == schema.end() ? primitive("value")
                                                      : visit(*items_it, base + "-item", where + "/items");
    const int min = count(schema, "minItems", where).value_or(0);
    const auto max = count(schema, "maxItems", where);
    if (max && *max < min) unsupported(where, "maxItems is below minItems");
    primitive("ws");
    const std::string item_rule = add_rule(base + "-item", item);
    if (max && *max == 0) return add_rule(base, R"("[" ws "]" ws)");
    // The first item, then the others each after a comma.
    const auto others = fmt::format(R"({} ("," ws {}){})", item_rule, item_rule,
                                    repetition(std::max(min - 1, 0), max ? std::optional(*max - 1) : std::nullopt));
    const auto body = min > 0 ? fmt::format(R"("[" ws {} "]" ws)", others) : fmt::format(R"("[" ws ({})? "]" ws)", others);
    return add_rule(base, body);
  }

  std::string object(const json& schema, const std::string& base, const std::string& where) {
    const auto properties = schema.find("properties");
    if (properties == schema.end() || properties->empty()) return free_object(schema, base, where);
    if (!properties->is_object()) unsupported(where, "properties must be an object");
    std::set<std::string> required;
    if (const auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) unsupported(where, "required must be a list of names");
      for (const auto& name : *it) {
        if (!name.is_string() || !properties->contains(name.get<std::string>())) {
          unsupported(where, fmt::format("required names {}, which is not among its properties", name.dump()));
        }
        required.insert(name.get<std::string>());
      }
    }
    primitive("ws");
    struct Member {
      std::string rule;
      bool required;
    };
    std::vector<Member> members;
    for (const auto& [name, property] : properties->items()) {
      const auto value = visit(property, base + "-" + name, where + "/properties/" + name);
      const auto key = literal(json(name).dump(-1, ' ', false));
      members.push_back({add_rule(base + "-" + name + "-kv", fmt::format("{} ws \":\" ws {}", key, value)),
                         required.contains(name)});
    }
    // first_i: the members from i on, none written yet; rest_i: the same after one was written.
    std::vector<std::string> first(members.size() + 1, "\"\""), rest(members.size() + 1, "\"\"");
    for (std::size_t i = members.size(); i-- > 0;) {
      const auto& m = members[i];
      rest[i] = m.required ? fmt::format("\",\" ws {} {}", m.rule, rest[i + 1])
                           : fmt::format("(\",\" ws {})? {}", m.rule, rest[i + 1]);
      rest[i] = add_rule(fmt::format("{}-rest-{}", base, i), rest[i]);
      first[i] = m.required ? fmt::format("{} {}", m.rule, rest[i + 1])
                            : fmt::format("{} {} | {}", m.rule, rest[i + 1], first[i + 1]);
      first[i] = add_rule(fmt::format("{}-first-{}", base, i), first[i]);
    }
    return add_rule(base, fmt::format(R"("{{" ws {} "}}" ws)", first[0]));
  }

  // An object without listed properties: any members, or members of the additionalProperties schema.
  std::string free_object(const json& schema, const std::string& base, const std::string& where) {
    const auto extra = schema.find("additionalProperties");
    if (extra == schema.end() || *extra == true) return primitive("object");
    if (*extra == false) {
      primitive("ws");
      return R"("{" ws "}" ws)";
    }
    const auto value = visit(*extra, base + "-value", where + "/additionalProperties");
    const auto member = add_rule(base + "-kv", fmt::format("{} \":\" ws {}", primitive("string"), value));
    return add_rule(base, fmt::format(R"("{{" ws ({} ("," ws {})*)? "}}" ws)", member, member));
  }

  const json& root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> references_;
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema, const std::string& top_rule) {
  return SchemaCompiler(schema).compile(top_rule);
}

std::string json_object_gbnf() {
  return json_schema_to_gbnf(json{{"type", "object"}});
}

}  // namespace rf::grammar
