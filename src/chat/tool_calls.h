#pragma once
// Tool calls in a chat model's reply: the format a checkpoint's chat template teaches its model
// (read from the template's text), and a parser that takes the reply apart into its text and its
// calls while it streams. The formats:
//   Hermes (Qwen 2.5 and 3, Hermes 2 Pro): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
//     a block for each call, text around them.
//   Mistral (v0.3, Nemo, Small, Mixtral 8x22B): [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//     after any text, to the end of the reply; a call may carry the model's own "id". Replies of
//     v11 tokenizers (Small 3.2, Devstral, Magistral) are read too: [TOOL_CALLS]name[ARGS]{...}
//     (or name[CALL_ID]id[ARGS]{...}) for each call. A required call is held to the list form.
//   Llama 3.1 to 3.3: {"name": ..., "parameters": {...}} as the whole reply (after <|python_tag|>
//     or not); several are separated by ';'.
//   Generic, for templates that know no tools: the reply is {"tool_calls": [{"name": ...,
//     "arguments": {...}}, ...]} or {"response": "text"}, as the system message that
//     generic_tool_messages adds teaches, and a grammar holds the model to.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rf {

enum class ToolCallFormat { Generic, Hermes, Mistral, Llama3 };

ToolCallFormat tool_call_format(std::string_view template_source);
const char* to_string(ToolCallFormat format);

// The text that opens a call ("" for Generic). Mistral's and Llama's are special tokens, which a
// decoder must be told to keep (StreamDecoder's shown_special).
std::string_view tool_call_marker(ToolCallFormat format);
// Every piece of a format's call syntax that a vocabulary may hold as a special token: the marker,
// and Mistral v11's [ARGS] and [CALL_ID].
std::vector<std::string_view> tool_call_syntax(ToolCallFormat format);

struct ToolCall {
  std::string id;         // the model's own (Mistral's may have one), else empty
  std::string name;
  std::string arguments;  // a JSON object, as text
};

// What a parser released: text that is surely no part of a call, and the calls completed.
struct ParsedReply {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolCallParser {
 public:
  // `names`: the functions the request offers; a "call" of any other function stays text.
  // `parallel`: false keeps the first call only. `opened`: the prompt ends with the format's
  // marker already (a call was required), so the reply starts inside the call.
  ToolCallParser(ToolCallFormat format, std::vector<std::string> names, bool parallel = true, bool opened = false);

  ParsedReply push(std::string_view text);
  ParsedReply finish();  // at the end of the reply: what was held back
  bool called() const { return calls_ > 0; }

 private:
  enum class Mode { Start, Text, Call };
  void release_text(ParsedReply& out, std::size_t length);
  void close_call(ParsedReply& out, std::string_view block, std::string_view closing);
  bool scan_start();

  ToolCallFormat format_;
  std::vector<std::string> names_;
  bool parallel_;
  Mode mode_;
  std::string held_;       // text not released yet
  std::string opening_;    // what opened the call being read (the marker, or nothing)
  std::size_t calls_ = 0;  // calls released so far
};

// The messages a template without tools is given: a system message describing the tools and
// the Generic reply format (joined to the conversation's own system message, if it opens it;
// none when `tools` is null or empty), earlier calls written as the model would write them,
// and the tools' results as user messages. A template that takes no system role (Gemma 2's
// raises) gets the description at the head of the first user message instead.
nlohmann::ordered_json generic_tool_messages(nlohmann::ordered_json messages, const nlohmann::ordered_json& tools,
                                             bool system_role = true);

}  // namespace rf
