#include "chat/chat_template.h"

#include "chat/ast.h"
#include "chat/interpreter.h"
#include "chat/parser.h"
#include "chat/source.h"
#include "util/error.h"

namespace rf {

struct ChatTemplate::Parsed {
  std::string source;  // normalized; error positions refer to it
  jinja::ast::Body body;
};

ChatTemplate ChatTemplate::parse(const std::string& source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source = jinja::normalize_source(source);
  parsed->body = jinja::parse(parsed->source);
  return ChatTemplate(std::move(parsed));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) fail("chat template context must be a JSON object, not {}", context.type_name());
  const jinja::Value variables = jinja::Value::from_json(context);
  return jinja::render(parsed_->source, parsed_->body, variables.as_dict());
}

std::string render_chat(const ChatTemplate& chat_template, const nlohmann::ordered_json& messages,
                        bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                        const nlohmann::ordered_json& extra) {
  if (!extra.is_object()) fail("chat template extra variables must be a JSON object, not {}", extra.type_name());
  nlohmann::ordered_json context = {{"messages", messages},
                                    {"tools", nullptr},
                                    {"documents", nullptr},
                                    {"add_generation_prompt", add_generation_prompt}};
  if (!bos_token.empty()) context["bos_token"] = bos_token;
  if (!eos_token.empty()) context["eos_token"] = eos_token;
  for (const auto& [key, value] : extra.items()) context[key] = value;
  return chat_template.render(context);
}

}  // namespace rf
