#pragma once
// OpenAI's tools, tool_choice and parallel_tool_calls, checked (400s naming the field) and turned
// into what the rest of a chat request needs: the tools for the template, the format to parse
// the reply by, and, where a call is required (tool_choice "required" or a named function), a
// grammar that makes the reply a valid call of the format whatever the model's quality.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"

namespace rf::server {

struct ToolUse {
  ToolCallFormat format = ToolCallFormat::Generic;
  nlohmann::ordered_json tools;    // as the request gave them, for the template
  std::vector<std::string> names;  // of the functions offered
  bool parallel = true;            // parallel_tool_calls
  // The reply's grammar: where a call is required, and always for the Generic format, whose
  // replies are JSON (a call or a response).
  std::optional<std::string> gbnf;
  // The prompt ends with the format's marker: a call is required of a format whose marker is a
  // special token, which a grammar over text cannot ask for.
  bool opened = false;
};

// nullopt when the request offers no tools, or tool_choice is "none". `raw_body` is read again
// for the tools, whose parameters' properties must keep their order (the order calls give them).
std::optional<ToolUse> requested_tools(const std::string& raw_body, const nlohmann::json& body, ToolCallFormat format);

}  // namespace rf::server
