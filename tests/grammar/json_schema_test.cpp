#include "grammar/json_schema.h"

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "grammar/gbnf.h"
#include "grammar/matches.h"
#include "util/error.h"

namespace rf::grammar {
namespace {

using json = nlohmann::ordered_json;

void expect_instances(const json& schema, std::initializer_list<std::pair<const char*, bool>> cases) {
  const std::string gbnf = json_schema_to_gbnf(schema);
  const Grammar grammar = parse_gbnf(gbnf);
  for (const auto& [text, in] : cases) {
    EXPECT_EQ(matches(grammar, text), in) << "instance: " << text << "\nschema: " << schema.dump() << "\n" << gbnf;
  }
}

std::string error_of(const json& schema) {
  return error_message([&] { json_schema_to_gbnf(schema); });
}

TEST(JsonSchema, ObjectsKeepRequiredAndOrderedProperties) {
  const auto schema = json::parse(R"({"type": "object", "additionalProperties": false, "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "nick": {"type": "string"}, "age": {"type": "integer"}}})");
  expect_instances(schema, {{R"({"name":"Ann","age":3})", true},
                            {R"({ "name": "Ann", "nick": "A",
  "age": -30 })", true},
                            {R"({"name":"Ann"})", false},
                            {R"({"age":3,"name":"Ann"})", false},
                            {R"({"name":"Ann","age":3.5})", false},
                            {R"({"name":"Ann","age":3,})", false},
                            {R"({"name":"A\"n\u00e9","age":0})", true},
                            {R"({"name":"A\q","age":0})", false}});
}

TEST(JsonSchema, OptionalPropertiesOnly) {
  const auto schema = json::parse(R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}}})");
  expect_instances(schema, {{"{}", true}, {R"({"a":true})", true}, {R"({"b":null})", true}, {R"({"a":false,"b":null})", true},
                            {R"({,"b":null})", false}, {R"({"b":null,"a":true})", false}});
}

TEST(JsonSchema, ArraysEnumsConstAndUnions) {
  expect_instances(json::parse(R"({"type": "array", "items": {"enum": ["red", 2, null, {"x": [1]}]}, "minItems": 1, "maxItems": 3})"),
                   {{R"(["red"])", true}, {R"(["red", 2, null])", true}, {R"([{"x":[1]}])", true}, {"[]", false},
                    {R"(["red",2,null,2])", false}, {R"(["blue"])", false}});
  expect_instances(json::parse(R"({"anyOf": [{"type": "number"}, {"const": "none"}], "description": "d"})"),
                   {{"1.5e3", true}, {"-0.25", true}, {R"("none")", true}, {"01", false}, {R"("some")", false}});
  expect_instances(json::parse(R"({"type": ["string", "null"], "maxLength": 2, "minLength": 1})"),
                   {{R"("ab")", true}, {"null", true}, {R"("")", false}, {R"("abc")", false}});
  expect_instances(json::parse(R"({"type": "array", "maxItems": 0})"), {{"[]", true}, {"[1]", false}});
}

TEST(JsonSchema, DefinitionsMayRecurse) {
  const auto schema = json::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "required": ["children"],
    "additionalProperties": false, "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}})");
  expect_instances(schema, {{R"({"children":[]})", true}, {R"({"children":[{"children":[{"children":[]}]}]})", true},
                            {R"({"children":[{}]})", false}});
}

TEST(JsonSchema, FormatsAndFreeObjects) {
  expect_instances(json::parse(R"({"type": "string", "format": "date-time"})"),
                   {{R"("2026-11-27T15:20:57Z")", true}, {R"("2026-13-27T15:20:57Z")", false}, {R"("2026-11-27")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "uuid"})"),
                   {{R"("123e4567-e89b-12d3-a456-426614174000")", true}, {R"("123e4567")", false}});
  expect_instances(json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})"),
                   {{R"({"a":1,"b":2})", true}, {"{}", true}, {R"({"a":"x"})", false}});
  expect_instances(json::parse(R"({"type": "object"})"), {{R"({"a":[1,{"b":null}],"c":"d"})", true}, {"[]", false}});
}

// Integer bounds spelled out as digit ranges: every integer from -5000 to 5000 (and some long ones)
// is in the language exactly when the bounds hold, checked against integer comparison.
TEST(JsonSchema, IntegerBoundsHoldForEveryValue) {
  struct Bounds {
    const char* keywords;
    long long low, high;  // inclusive
  };
  const long long none = 9'999'999'999'999'999;  // 16 digits: the grammar's longest integers
  const Bounds cases[] = {
      {R"("minimum": 0)", 0, none},
      {R"("minimum": 1, "maximum": 12)", 1, 12},
      {R"("minimum": 15, "maximum": 4321)", 15, 4321},
      {R"("minimum": -250, "maximum": 37)", -250, 37},
      {R"("minimum": -1999, "maximum": -20)", -1999, -20},
      {R"("exclusiveMinimum": 9, "exclusiveMaximum": 1000)", 10, 999},
      {R"("minimum": 2.5, "maximum": 7.5)", 3, 7},
      {R"("maximum": -3)", -none, -3},
      {R"("maximum": 100)", -none, 100},
      {R"("minimum": 1000, "exclusiveMinimum": 999, "maximum": 1000)", 1000, 1000},
  };
  for (const auto& c : cases) {
    const auto schema = json::parse(std::string(R"({"type": "integer", )") + c.keywords + "}");
    const Grammar grammar = parse_gbnf(json_schema_to_gbnf(schema));
    std::size_t wrong = 0;
    auto check = [&](long long v) {
      const bool in = v >= c.low && v <= c.high;
      if (matches(grammar, std::to_string(v)) != in) {
        ++wrong;
        ADD_FAILURE() << c.keywords << ": " << v << (in ? " refused" : " taken");
      }
    };
    for (long long v = -5000; v <= 5000; ++v) check(v);
    for (long long v : {123456789LL, -123456789LL, 9999999999999999LL, -9999999999999999LL}) check(v);
    EXPECT_FALSE(matches(grammar, "01")) << c.keywords;
    EXPECT_FALSE(matches(grammar, "-0")) << c.keywords;
    std::printf("%s: %zu values wrongly judged (tolerance 0)\n", c.keywords, wrong);
  }
  EXPECT_NE(error_of(json::parse(R"({"type": "integer", "minimum": 5, "maximum": 4})")).find("no integer"), std::string::npos);
}

// Every number from -4 to 4 in steps of 0.0005, written with up to five decimals (trailing zeros
// too), judged by the grammar and by strtod's doubles (exact in order at these few digits).
TEST(JsonSchema, NumberBoundsHoldForEveryValue) {
  const char* cases[] = {
      R"("minimum": 0.5, "maximum": 2.25)",
      R"("exclusiveMinimum": -1.5, "maximum": 0)",
      R"("minimum": -0.001)",
      R"("exclusiveMaximum": 0)",
      R"("minimum": 0.1, "exclusiveMaximum": 0.3)",
      R"("minimum": 3, "maximum": 3)",
      R"("minimum": 1e-3, "exclusiveMaximum": 2.5e0)",
      R"("exclusiveMinimum": -3, "maximum": -2.75)",
      R"("minimum": -0.0005, "exclusiveMaximum": 0.0005)",
      R"("minimum": 1.25, "exclusiveMinimum": 1.25, "maximum": 3.5, "exclusiveMaximum": 3.75)",
  };
  for (const char* keywords : cases) {
    const auto schema = json::parse(std::string(R"({"type": "number", )") + keywords + "}");
    const Grammar grammar = parse_gbnf(json_schema_to_gbnf(schema));
    auto bound = [&](const char* key) { return schema.contains(key) ? std::optional(schema[key].get<double>()) : std::nullopt; };
    const auto min = bound("minimum"), max = bound("maximum"), above = bound("exclusiveMinimum"), below = bound("exclusiveMaximum");
    std::size_t wrong = 0, checked = 0;
    for (int step = -8000; step <= 8000; ++step) {
      for (int decimals = 0; decimals <= 5; ++decimals) {
        if (decimals < 4 && step % (decimals == 0 ? 2000 : decimals == 1 ? 200 : decimals == 2 ? 20 : 2) != 0) continue;
        const std::string text = fmt::format("{:.{}f}", step * 0.0005, decimals);
        if (text.starts_with("-") && text.find_first_not_of("-0.") == std::string::npos) continue;  // -0
        const double v = std::strtod(text.c_str(), nullptr);
        const bool in = (!min || v >= *min) && (!max || v <= *max) && (!above || v > *above) && (!below || v < *below);
        ++checked;
        if (matches(grammar, text) != in) {
          ++wrong;
          ADD_FAILURE() << keywords << ": " << text << (in ? " refused" : " taken");
        }
      }
    }
    for (const char* never : {"1.", "01", "-0", "1e0", ".5", "+1"}) EXPECT_FALSE(matches(grammar, never)) << keywords << ": " << never;
    std::printf("%s: %zu of %zu values wrongly judged (tolerance 0)\n", keywords, wrong, checked);
  }
  EXPECT_NE(error_of(json::parse(R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})")).find("no number"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "number", "minimum": 1e20})")).find("16 digits"), std::string::npos);
}

TEST(JsonSchema, MultiplesHoldForEveryValue) {
  struct Case {
    const char* keywords;
    long long step, low, high;
  };
  const long long none = 1'000'000;
  const Case cases[] = {{R"("type": "integer", "multipleOf": 3)", 3, -none, none},
                        {R"("type": "integer", "multipleOf": 1)", 1, -none, none},
                        {R"("type": "integer", "multipleOf": 40)", 40, -none, none},
                        {R"("type": "number", "multipleOf": 5)", 5, -none, none},
                        {R"("type": "integer", "multipleOf": 7, "minimum": -20, "exclusiveMaximum": 49)", 7, -20, 48},
                        {R"("type": "integer", "multipleOf": 2, "minimum": 0)", 2, 0, none},
                        {R"("type": "integer", "multipleOf": 4, "exclusiveMinimum": 0)", 4, 1, none}};
  for (const auto& c : cases) {
    const Grammar grammar = parse_gbnf(json_schema_to_gbnf(json::parse(std::string("{") + c.keywords + "}")));
    std::size_t wrong = 0;
    for (long long v = -1000; v <= 1000; ++v) {
      const bool in = v % c.step == 0 && v >= c.low && v <= c.high;
      if (matches(grammar, std::to_string(v)) != in) {
        ++wrong;
        ADD_FAILURE() << c.keywords << ": " << v << (in ? " refused" : " taken");
      }
    }
    for (const char* never : {"-0", "00", "03", "1.0"}) EXPECT_FALSE(matches(grammar, never)) << c.keywords << ": " << never;
    std::printf("%s: %zu of 2001 values wrongly judged (tolerance 0)\n", c.keywords, wrong);
  }
}

TEST(JsonSchema, FormatsTakeOnlyWhatValidatorsTake) {
  expect_instances(json::parse(R"({"type": "string", "format": "date"})"),
                   {{R"("2024-01-31")", true}, {R"("2023-02-28")", true}, {R"("2023-02-30")", false},
                    {R"("2023-04-31")", false}, {R"("2023-11-30")", true}, {R"("2023-13-01")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "ipv4"})"),
                   {{R"("192.168.0.1")", true}, {R"("255.255.255.255")", true}, {R"("256.1.1.1")", false},
                    {R"("01.2.3.4")", false}, {R"("1.2.3")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "email"})"),
                   {{R"("ada.lovelace@example.org")", true}, {R"("a..b@example.org")", false},
                    {R"("a@localhost")", false}, {R"("a@-x.org")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "duration"})"),
                   {{R"("P3Y6M4DT12H30M5S")", true}, {R"("PT1M")", true}, {R"("P2W")", true}, {R"("P")", false},
                    {R"("PT")", false}, {R"("P1D2Y")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "ipv6"})"),
                   {{R"("2001:db8:0:0:0:ff00:42:8329")", true}, {R"("2001:db8::1")", false}});
  expect_instances(json::parse(R"({"type": "string", "format": "hostname"})"),
                   {{R"("api.example.com")", true}, {R"("a-b.c")", true}, {R"("-a.com")", false}, {R"("a_b.com")", false}});
}

TEST(JsonSchema, RefusesWhatItCannotEnforceByName) {
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "pattern": "(a)\\1"})")).find("pattern"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "number", "multipleOf": 0.5})")).find("multipleOf"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "integer", "multipleOf": 2, "minimum": 5})")).find("multipleOf"),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "integer", "uniqueItems": true})")).find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "format": "iri"})")).find("format"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})")).find("\"b\""),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"$ref": "#/$defs/missing"})")).find("missing"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "text"})")).find("unknown type 'text'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2.5}}})"))
                .find("/properties/a"),
            std::string::npos);
}

}  // namespace
}  // namespace rf::grammar
