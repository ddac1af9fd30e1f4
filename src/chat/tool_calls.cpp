#include "chat/tool_calls.h"

#include <algorithm>

namespace rf {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]", kMistralArgs = "[ARGS]", kMistralCallId = "[CALL_ID]";

struct Markers {
  std::string_view open;   // opens a call ("": the reply itself is the call)
  std::string_view close;  // closes it ("": the call runs to the end of the reply)
  bool json_opens;         // a reply that starts with '{' is a call
};

Markers markers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes: return {"<tool_call>", "</tool_call>", false};
    case ToolCallFormat::Mistral: return {kMistralMarker, "", false};
    case ToolCallFormat::Llama3: return {"<|python_tag|>", "", true};
    case ToolCallFormat::Generic: break;
  }
  return {"", "", true};
}

bool blank(std::string_view text) { return text.find_first_not_of(kSpace) == std::string_view::npos; }

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// The length of the longest end of `text` that begins `marker` (but is not all of it).
std::size_t partial_marker(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.empty() ? 0 : marker.size() - 1); n > 0; --n) {
    if (text.ends_with(marker.substr(0, n))) return n;
  }
  return 0;
}

std::optional<ordered_json> parse_json(std::string_view text) {
  auto value = ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

// Top-level pieces of `text` between `separator`s outside strings, objects and arrays.
std::vector<std::string_view> split_json(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  int depth = 0;
  bool in_string = false, escaped = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == separator && depth == 0) {
      pieces.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

// {"name": ..., "arguments" or "parameters": {...}, "id"?: ...} naming one of `names`.
std::optional<ToolCall> call_from(const ordered_json& value, const std::vector<std::string>& names) {
  if (!value.is_object()) return std::nullopt;
  const auto name = value.find("name");
  if (name == value.end() || !name->is_string()) return std::nullopt;
  ToolCall call{.name = name->get<std::string>()};
  if (std::find(names.begin(), names.end(), call.name) == names.end()) return std::nullopt;
  auto arguments = value.find("arguments");
  if (arguments == value.end()) arguments = value.find("parameters");
  ordered_json object = ordered_json::object();
  if (arguments != value.end() && arguments->is_string()) {
    auto parsed = parse_json(arguments->get<std::string>());  // some models write the arguments as a string
    if (!parsed) return std::nullopt;
    object = std::move(*parsed);
  } else if (arguments != value.end()) {
    object = *arguments;
  }
  if (!object.is_object()) return std::nullopt;
  call.arguments = object.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (const auto id = value.find("id"); id != value.end() && id->is_string()) call.id = id->get<std::string>();
  return call;
}

std::optional<ParsedReply> calls_from(const ordered_json& list, const std::vector<std::string>& names) {
  if (!list.is_array() || list.empty()) return std::nullopt;
  ParsedReply reply;
  for (const auto& item : list) {
    auto call = call_from(item, names);
    if (!call) return std::nullopt;
    reply.calls.push_back(std::move(*call));
  }
  return reply;
}

// Mistral's v11 tokenizers (Mistral Small 3.2, Devstral, Magistral): after the first marker,
// name[ARGS]{...} or name[CALL_ID]id[ARGS]{...}, each further call after a marker of its own.
std::optional<ParsedReply> mistral_v11_calls(std::string_view text, const std::vector<std::string>& names) {
  ParsedReply reply;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t next = text.find(kMistralMarker, start);
    const std::string_view piece = text.substr(start, next == std::string_view::npos ? text.npos : next - start);
    const std::size_t args = piece.find(kMistralArgs);
    if (args == std::string_view::npos) return std::nullopt;
    std::string_view head = piece.substr(0, args);
    ordered_json value = {{"arguments", parse_json(piece.substr(args + kMistralArgs.size())).value_or(nullptr)}};
    if (const std::size_t id = head.find(kMistralCallId); id != std::string_view::npos) {
      value["id"] = std::string(trimmed(head.substr(id + kMistralCallId.size())));
      head = head.substr(0, id);
    }
    value["name"] = std::string(trimmed(head));
    auto call = value["arguments"].is_object() ? call_from(value, names) : std::nullopt;
    if (!call) return std::nullopt;
    reply.calls.push_back(std::move(*call));
    if (next == std::string_view::npos) break;
    start = next + kMistralMarker.size();
  }
  return reply;
}

// A call's text (between its markers, or the whole reply) taken apart; nullopt when it is not one.
std::optional<ParsedReply> parse_call(ToolCallFormat format, std::string_view text, const std::vector<std::string>& names) {
  if (format == ToolCallFormat::Llama3) {
    ParsedReply reply;
    for (const auto piece : split_json(text, ';')) {
      const auto value = parse_json(piece);
      auto call = value ? call_from(*value, names) : std::nullopt;
      if (!call) return std::nullopt;
      reply.calls.push_back(std::move(*call));
    }
    return reply;
  }
  const auto value = parse_json(text);
  if (!value && format == ToolCallFormat::Mistral) return mistral_v11_calls(text, names);
  if (!value) return std::nullopt;
  if (format == ToolCallFormat::Mistral && value->is_array()) return calls_from(*value, names);
  if (format == ToolCallFormat::Generic) {
    if (!value->is_object() || value->size() != 1) return std::nullopt;
    if (const auto calls = value->find("tool_calls"); calls != value->end()) return calls_from(*calls, names);
    const auto response = value->find("response");
    if (response == value->end() || !response->is_string()) return std::nullopt;
    return ParsedReply{.content = response->get<std::string>()};
  }
  auto call = call_from(*value, names);
  if (!call) return std::nullopt;
  return ParsedReply{.calls = {std::move(*call)}};
}

std::string generic_tool_prompt(const ordered_json& tools) {
  std::string prompt = "You can call these tools, given as JSON schemas of their arguments:\n";
  for (const auto& tool : tools) {
    const auto& f = tool["function"];
    ordered_json brief = {{"name", f["name"]}};
    if (f.contains("description")) brief["description"] = f["description"];
    brief["parameters"] = f.value("parameters", ordered_json::object());
    prompt += brief.dump() + "\n";
  }
  return prompt + "\nReply with a JSON object: {\"tool_calls\": [{\"name\": \"<a tool's name>\", \"arguments\": {<its arguments>}}]}"
                  " to call tools, or {\"response\": \"<your answer>\"} to answer directly.";
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view source) {
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::Hermes;
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::Mistral;
  // Llama 3.1's template names its code-interpreter marker; 3.2's and 3.3's the ipython role.
  if (source.find("<|python_tag|>") != std::string_view::npos || source.find("ipython") != std::string_view::npos) {
    return ToolCallFormat::Llama3;
  }
  return ToolCallFormat::Generic;
}

const char* to_string(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Generic: break;
  }
  return "generic";
}

std::string_view tool_call_marker(ToolCallFormat format) { return markers(format).open; }

std::vector<std::string_view> tool_call_syntax(ToolCallFormat format) {
  if (format == ToolCallFormat::Mistral) return {kMistralMarker, kMistralArgs, kMistralCallId};
  const std::string_view marker = tool_call_marker(format);
  return marker.empty() ? std::vector<std::string_view>{} : std::vector{marker};
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::vector<std::string> names, bool parallel, bool opened)
    : format_(format),
      names_(std::move(names)),
      parallel_(parallel),
      mode_(opened ? Mode::Call : markers(format).json_opens ? Mode::Start : Mode::Text) {}

ParsedReply ToolCallParser::push(std::string_view text) {
  held_ += text;
  ParsedReply out;
  const Markers m = markers(format_);
  for (;;) {
    if (mode_ == Mode::Start && !scan_start()) break;
    if (mode_ == Mode::Text) {
      const auto at = m.open.empty() ? std::string::npos : held_.find(m.open);
      if (at == std::string::npos) {
        release_text(out, held_.size() - partial_marker(held_, m.open));
        break;
      }
      release_text(out, at);  // space before the marker goes with the call
      held_.erase(0, held_.find(m.open) + m.open.size());
      opening_ = m.open;
      mode_ = Mode::Call;
    }
    if (mode_ != Mode::Call || m.close.empty()) break;
    const auto end = held_.find(m.close);
    if (end == std::string::npos) break;
    const std::string block = held_.substr(0, end);
    held_.erase(0, end + m.close.size());
    close_call(out, block, m.close);
    mode_ = Mode::Text;
  }
  return out;
}

ParsedReply ToolCallParser::finish() {
  ParsedReply out;
  if (mode_ == Mode::Call) {
    close_call(out, held_, "");
  } else if (calls_ == 0 || !blank(held_)) {
    out.content = held_;
  }
  held_.clear();
  return out;
}

// Decides, from the first visible character, whether the reply is a call (JSON) or text.
bool ToolCallParser::scan_start() {
  const auto first = held_.find_first_not_of(kSpace);
  if (first == std::string::npos) return false;
  const std::string_view rest = std::string_view(held_).substr(first);
  const auto open = markers(format_).open;
  if (rest.front() == '{') {
    held_.erase(0, first);
    opening_.clear();
    mode_ = Mode::Call;
  } else if (rest.size() < open.size() && open.starts_with(rest)) {
    return false;  // maybe the marker: wait for more
  } else {
    mode_ = Mode::Text;
  }
  return true;
}

// Releases held_'s first `length` bytes as text, but for trailing space: whether it belongs to
// the text or goes with a call is known only from what follows.
void ToolCallParser::release_text(ParsedReply& out, std::size_t length) {
  const auto last = length == 0 ? std::string::npos : held_.find_last_not_of(kSpace, length - 1);
  if (last == std::string::npos) return;
  out.content.append(held_, 0, last + 1);
  held_.erase(0, last + 1);
}

void ToolCallParser::close_call(ParsedReply& out, std::string_view block, std::string_view closing) {
  auto parsed = parse_call(format_, trimmed(block), names_);
  if (!parsed) {  // not a call after all: the model's text, markers and all
    out.content += opening_ + std::string(block) + std::string(closing);
    return;
  }
  out.content += parsed->content;
  for (auto& call : parsed->calls) {
    if (!parallel_ && calls_ > 0) break;
    out.calls.push_back(std::move(call));
    ++calls_;
  }
}

nlohmann::ordered_json generic_tool_messages(ordered_json messages, const ordered_json& tools, bool system_role) {
  ordered_json out = ordered_json::array();
  if (tools.is_array() && !tools.empty()) {
    const std::string prompt = generic_tool_prompt(tools);
    // The tools open the conversation's own opening message where the template takes no system role.
    const char* opening_role = system_role ? "system" : "user";
    if (!messages.empty() && messages[0]["role"] == opening_role) {
      messages[0]["content"] = system_role ? messages[0]["content"].get<std::string>() + "\n\n" + prompt
                                           : prompt + "\n\n" + messages[0]["content"].get<std::string>();
    } else {
      out.push_back({{"role", opening_role}, {"content", prompt}});
    }
  }
  bool after_tool = false;
  for (ordered_json& message : messages) {
    const bool tool = message["role"] == "tool";
    if (tool) {
      const ordered_json result = {{"tool_response", {{"tool_call_id", message.value("tool_call_id", "")},
                                                      {"content", message["content"]}}}};
      // The results of parallel calls come as one turn: templates insist that roles alternate.
      if (after_tool) {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + result.dump();
      } else {
        out.push_back({{"role", "user"}, {"content", result.dump()}});
      }
    } else {
      if (const auto calls = message.find("tool_calls"); calls != message.end()) {
        ordered_json written = ordered_json::array();
        for (const auto& call : *calls) {
          written.push_back({{"name", call["function"]["name"]}, {"arguments", call["function"]["arguments"]}});
        }
        message.erase("tool_calls");
        message["content"] = ordered_json{{"tool_calls", written}}.dump();
      }
      out.push_back(std::move(message));
    }
    after_tool = tool;
  }
  return out;
}

}  // namespace rf
