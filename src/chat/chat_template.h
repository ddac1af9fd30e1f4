#pragma once
// Chat templates: the Jinja program that a checkpoint ships (tokenizer_config.json's
// "chat_template", GGUF's tokenizer.chat_template) to turn a conversation into its prompt.
// Rendered as transformers' apply_chat_template renders it: jinja2 in its immutable sandbox with
// trim_blocks and lstrip_blocks, plus transformers' tojson, raise_exception and strftime_now.
// The Jinja implemented (src/chat/) is what real templates use. Left out: template inheritance
// and includes, {% raw %}, {% with %}, recursive loops, *args/**kwargs, loop.cycle/depth,
// str % formatting and str.format, and Unicode case mappings that change length (ß -> SS).
// Where jinja2 would raise on an undefined value's attribute, the attribute is undefined.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace rf {

class ChatTemplate {
 public:
  // Throws rf::Error naming the line and column of the first syntax error.
  static ChatTemplate parse(const std::string& source);

  // Renders with the entries of `context` (a JSON object) as the template's variables.
  // ordered_json because key order is output: tojson writes keys in the order given.
  // Throws rf::Error: raise_exception(message) gives exactly `message`, other errors name
  // the line and column. Safe to call from several threads at once.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Parsed;
  explicit ChatTemplate(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;
};

// transformers' apply_chat_template(messages, tools=None, add_generation_prompt=...): the
// template sees `messages`, `add_generation_prompt`, `bos_token` and `eos_token` (undefined
// when empty, as for a tokenizer that has none), `tools` and `documents` (None unless `extra`
// sets them), and every entry of `extra` (tools, date_string, enable_thinking, ...).
std::string render_chat(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace rf
