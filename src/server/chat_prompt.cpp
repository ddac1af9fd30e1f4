#include "server/chat_prompt.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "formats/gguf.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// tokenizer_config.json's chat_template: a string, or a list of named templates ("default" first).
std::optional<std::string> hf_template(const fs::path& folder) {
  if (auto jinja = read_file(folder / "chat_template.jinja")) return jinja;
  const auto config_text = read_file(folder / "tokenizer_config.json");
  if (!config_text) return std::nullopt;
  const json config = json::parse(*config_text, nullptr, false);
  const auto it = config.is_object() ? config.find("chat_template") : config.end();
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& named : *it) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template")) {
        return named["template"].get<std::string>();
      }
    }
  }
  fail("{}: chat_template must be a string or a list with a \"default\" template", (folder / "tokenizer_config.json").string());
}

std::string token_text(const Tokenizer& tokenizer, std::optional<TokenId> id) {
  return id ? tokenizer.id_to_token(*id) : std::string();
}

// Whether the template renders a system message (Gemma 2's raises an exception).
bool takes_system_role(const ChatTemplate& chat, const std::string& bos, const std::string& eos) {
  const auto messages = nlohmann::ordered_json::array({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}});
  try {
    render_chat(chat, messages, true, bos, eos, nlohmann::ordered_json::object());
    return true;
  } catch (const Error&) {
    return false;
  }
}

const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool"};

// An assistant message's tool_calls, with their arguments as objects: templates write them with
// tojson, and OpenAI's clients send them as JSON text.
void checked_tool_calls(nlohmann::ordered_json& message, const std::string& where) {
  const auto calls = message.find("tool_calls");
  if (calls == message.end() || calls->is_null()) {
    if (calls != message.end()) message.erase("tool_calls");
    return;
  }
  if (!calls->is_array()) bad_field(where + ".tool_calls", "must be an array");
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const std::string at = fmt::format("{}.tool_calls[{}]", where, i);
    auto& call = (*calls)[i];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) bad_field(at + ".function", "must be an object");
    auto& f = call["function"];
    if (!f.contains("name") || !f["name"].is_string()) bad_field(at + ".function.name", "must be a string");
    auto& arguments = f["arguments"];
    if (arguments.is_string()) {
      arguments = nlohmann::ordered_json::parse(arguments.get<std::string>(), nullptr, false);
      if (arguments.is_discarded()) bad_field(at + ".function.arguments", "must be a JSON object, as text or not");
    }
    if (arguments.is_null()) arguments = nlohmann::ordered_json::object();
    if (!arguments.is_object()) bad_field(at + ".function.arguments", "must be a JSON object, as text or not");
  }
}

// One message with its content as plain text: the templates of text models expect a string.
nlohmann::ordered_json checked_message(const json& message, std::size_t index) {
  const std::string where = fmt::format("messages[{}]", index);
  if (!message.is_object()) bad_field(where, "must be an object");
  const auto role = string_field(message, "role");
  if (!role) bad_field(where + ".role", "is required");
  if (std::find(std::begin(kRoles), std::end(kRoles), *role) == std::end(kRoles)) {
    bad_field(where + ".role", fmt::format("must be system, developer, user, assistant or tool, not '{}'", *role));
  }
  std::string content;
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    if (*role != "assistant") bad_field(where + ".content", "is required");
  } else {
    content = text_content(*it, where + ".content", {"text"});
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(message.dump());
  out["content"] = content;
  if (*role == "assistant") checked_tool_calls(out, where);
  if (*role == "tool" && out.contains("tool_call_id") && !out["tool_call_id"].is_string()) {
    bad_field(where + ".tool_call_id", "must be a string");
  }
  return out;
}
}  // namespace

ChatPrompt::ChatPrompt(std::string source, std::string bos, std::string eos)
    : template_(ChatTemplate::parse(source)),
      source_(std::move(source)),
      bos_(std::move(bos)),
      eos_(std::move(eos)),
      tool_format_(tool_call_format(source_)),
      system_role_(takes_system_role(template_, bos_, eos_)) {}

std::optional<ChatPrompt> ChatPrompt::load(const Checkpoint& checkpoint, const Tokenizer& tokenizer) {
  std::optional<std::string> source;
  if (checkpoint.gguf()) {
    source = checkpoint.gguf()->get_string_opt("tokenizer.chat_template");
  } else if (!checkpoint.tokenizer_json().empty()) {
    source = hf_template(fs::path(checkpoint.tokenizer_json()).parent_path());
  }
  if (!source) return std::nullopt;
  return ChatPrompt(std::move(*source), token_text(tokenizer, tokenizer.bos_id()), token_text(tokenizer, tokenizer.eos_id()));
}

std::string ChatPrompt::render(const json& messages, bool add_generation_prompt, const json& extra,
                               const ToolUse* tools) const {
  if (!messages.is_array() || messages.empty()) bad_field("messages", "must be a non-empty array of messages");
  nlohmann::ordered_json checked = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) checked.push_back(checked_message(messages[i], i));
  auto variables = nlohmann::ordered_json::parse(extra.dump());
  if (tool_format_ == ToolCallFormat::Generic) {
    checked = generic_tool_messages(std::move(checked), tools ? tools->tools : nlohmann::ordered_json(), system_role_);
  } else if (tools) {
    variables["tools"] = tools->tools;
  }
  try {
    std::string prompt = render_chat(template_, checked, add_generation_prompt, bos_, eos_, variables);
    if (tools && tools->opened) prompt += tool_call_marker(tool_format_);
    return prompt;
  } catch (const Error& e) {
    // A template may refuse a conversation (roles out of order, say) with raise_exception.
    throw ApiError(400, fmt::format("the chat template cannot render these messages: {}", e.what()), "messages");
  }
}

}  // namespace rf::server
