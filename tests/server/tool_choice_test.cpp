// tools and tool_choice: mistakes are 400s naming their field, and the grammar of a required call
// takes exactly the calls of the offered functions, in each format's own wrapping.
#include "server/tool_choice.h"

#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/matches.h"
#include "server/api_error.h"

namespace rf::server {
namespace {

using nlohmann::json;

const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
                  "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
  {"type": "function", "function": {"name": "walk", "parameters": {"$ref": "#/$defs/node", "$defs": {"node":
   {"type": "object", "properties": {"name": {"type": "string"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
    "required": ["name", "next"]}}}}}])";

std::optional<ToolUse> tools_of(const std::string& extra, ToolCallFormat format) {
  const std::string raw = R"({"tools": )" + std::string(kTools) + (extra.empty() ? "" : ", " + extra) + "}";
  return requested_tools(raw, json::parse(raw), format);
}

std::string field_of_error(const std::string& raw, ToolCallFormat format = ToolCallFormat::Hermes) {
  try {
    requested_tools(raw, json::parse(raw), format);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param;
  }
  return "no error";
}

void expect_matches(const ToolUse& use, std::initializer_list<std::pair<const char*, bool>> cases) {
  ASSERT_TRUE(use.gbnf);
  const auto grammar = grammar::parse_gbnf(*use.gbnf);
  for (const auto& [text, in] : cases) EXPECT_EQ(grammar::matches(grammar, text), in) << text << "\n" << *use.gbnf;
}

TEST(ToolChoice, MistakesNameTheirField) {
  EXPECT_EQ(field_of_error(R"({"tools": {}})"), "tools");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "code"}]})"), "tools[0].type");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function"}]})"), "tools[0].function");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})"), "tools[0].function.name");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})"),
            "tools[1].function.name");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]})"),
            "tools[0].function.parameters");
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function", "function": {"name": "f", "strict": 1}}]})"), "tools[0].function.strict");
  const std::string one = R"({"tools": [{"type": "function", "function": {"name": "f"}}], )";
  EXPECT_EQ(field_of_error(one + R"("tool_choice": "always"})"), "tool_choice");
  EXPECT_EQ(field_of_error(one + R"("tool_choice": {"type": "function", "function": {"name": "g"}}})"), "tool_choice.function.name");
  EXPECT_EQ(field_of_error(one + R"("parallel_tool_calls": "yes"})"), "parallel_tool_calls");
  EXPECT_EQ(field_of_error(R"({"tool_choice": "required"})"), "tool_choice");
  EXPECT_EQ(field_of_error(R"({"functions": [{"name": "f"}]})"), "functions");
  // A schema the grammar cannot hold a call to is refused when a call is required, not ignored.
  EXPECT_EQ(field_of_error(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"s": {"type": "array", "uniqueItems": true}}}}}], "tool_choice": "required"})"), "tools");
}

TEST(ToolChoice, NoneOrNoToolsMeansNoToolUse) {
  EXPECT_FALSE(tools_of(R"("tool_choice": "none")", ToolCallFormat::Hermes));
  EXPECT_FALSE(requested_tools("{}", json::object(), ToolCallFormat::Hermes));
  EXPECT_FALSE(requested_tools(R"({"tools": []})", json::parse(R"({"tools": []})"), ToolCallFormat::Hermes));
}

TEST(ToolChoice, AutoParsesWithoutAGrammarWhereTheTemplateKnowsTools) {
  const auto use = tools_of("", ToolCallFormat::Hermes);
  ASSERT_TRUE(use);
  EXPECT_FALSE(use->gbnf);
  EXPECT_EQ(use->names, (std::vector<std::string>{"get_weather", "get_time", "walk"}));
  EXPECT_TRUE(use->parallel);
}

TEST(ToolChoice, RequiredCallsInHermesBlocks) {
  expect_matches(*tools_of(R"("tool_choice": "required")", ToolCallFormat::Hermes),
                 {{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>", true},
                  {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                   "{\"name\": \"walk\", \"arguments\": {\"name\": \"a\", \"next\": {\"name\": \"b\", \"next\": null}}}\n</tool_call>", true},
                  {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>", false},
                  {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"days\": 0}}\n</tool_call>", false},
                  {"<tool_call>\n{\"name\": \"delete\", \"arguments\": {}}\n</tool_call>", false},
                  {"Sure! <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false},
                  {"", false}});
  expect_matches(*tools_of(R"("tool_choice": "required", "parallel_tool_calls": false)", ToolCallFormat::Hermes),
                 {{"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", true},
                  {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                   "{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false}});
}

TEST(ToolChoice, ANamedFunctionIsTheOnlyCall) {
  const auto use = tools_of(R"("tool_choice": {"type": "function", "function": {"name": "get_time"}})", ToolCallFormat::Llama3);
  expect_matches(*use, {{"{\"name\": \"get_time\", \"parameters\": {}}", true},
                        {"{\"name\": \"get_time\", \"arguments\": {}}", false},
                        {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}", false}});
  EXPECT_FALSE(use->opened);
}

TEST(ToolChoice, MistralListsFollowTheMarkerThePromptEndsWith) {
  const auto use = tools_of(R"("tool_choice": "required")", ToolCallFormat::Mistral);
  EXPECT_TRUE(use->opened);
  expect_matches(*use, {{"[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}]", true},
                        {"[]", false},
                        {"[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]", false}});
}

TEST(ToolChoice, GenericRepliesAreCallsOrAResponse) {
  expect_matches(*tools_of("", ToolCallFormat::Generic),
                 {{"{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]}", true},
                  {"{\"response\": \"Hello\"}", true},
                  {"{\"tool_calls\": []}", false},
                  {"Hello", false}});
  expect_matches(*tools_of(R"("tool_choice": "required")", ToolCallFormat::Generic),
                 {{"{\"tool_calls\": [{\"name\": \"get_time\", \"arguments\": {}}]}", true}, {"{\"response\": \"Hello\"}", false}});
}

}  // namespace
}  // namespace rf::server
