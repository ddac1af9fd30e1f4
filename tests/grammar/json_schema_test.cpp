#include "grammar/json_schema.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  try {
    json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
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
  EXPECT_NE(error_of(json::parse(R"({"type": "number", "minimum": 0})")).find("integers only"), std::string::npos);
}

TEST(JsonSchema, RefusesWhatItCannotEnforceByName) {
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "pattern": "^a+$"})")).find("'pattern'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "integer", "multipleOf": 3})")).find("'multipleOf'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "format": "email"})")).find("format"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})")).find("\"b\""),
            std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"$ref": "#/$defs/missing"})")).find("missing"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "text"})")).find("unknown type 'text'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": "object", "properties": {"a": {"type": "number", "multipleOf": 2}}})"))
                .find("/properties/a"),
            std::string::npos);
}

}  // namespace
}  // namespace rf::grammar
