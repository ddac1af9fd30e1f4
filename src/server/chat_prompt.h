#pragma once
// A checkpoint's chat template (tokenizer_config.json's chat_template, or chat_template.jinja
// beside it, or GGUF's tokenizer.chat_template) turning OpenAI chat messages into prompt text.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "model/checkpoint.h"
#include "server/tool_choice.h"
#include "tokenizer/tokenizer.h"

namespace rf::server {

class ChatPrompt {
 public:
  // nullopt when the checkpoint has no chat template; throws rf::Error for one that does not parse.
  static std::optional<ChatPrompt> load(const Checkpoint& checkpoint, const Tokenizer& tokenizer);

  // Checks OpenAI's `messages` (400 naming what is wrong) and renders them; `extra` holds more
  // variables for the template (vLLM's chat_template_kwargs, e.g. enable_thinking). `tools`:
  // the tools offered, in the template's way or, for a template without tools, the Generic one.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt, const nlohmann::json& extra,
                     const ToolUse* tools = nullptr) const;
  const std::string& source() const { return source_; }  // the template's text, as the checkpoint holds it
  ToolCallFormat tool_format() const { return tool_format_; }

 private:
  ChatPrompt(std::string source, std::string bos, std::string eos);

  ChatTemplate template_;
  std::string source_;
  std::string bos_;
  std::string eos_;
  ToolCallFormat tool_format_;
  bool system_role_;  // the template renders a system message
};

}  // namespace rf::server
