// A chat template and a conversation: the input is the template's source, then a NUL byte, then
// the messages as JSON (a fixed conversation where none parses). Templates come from checkpoints,
// messages from clients; the limits in chat/limits.h must hold for both.
#include <cstring>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rf;
  const std::string_view input = fuzz::as_text(data, size);
  const std::size_t split = input.find('\0');
  const std::string source(input.substr(0, split));
  auto messages = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}},
       {{"role", "assistant"}, {"content", "Hello."}}, {{"role", "user"}, {"content", "Again"}}});
  if (split != std::string_view::npos) {
    auto given = nlohmann::ordered_json::parse(input.substr(split + 1), nullptr, false);
    if (!given.is_discarded()) messages = std::move(given);
  }
  fuzz::expect_only_rf_errors([&] {
    const ChatTemplate chat = ChatTemplate::parse(source);
    render_chat(chat, messages, true, "<s>", "</s>", {{"tools", nlohmann::ordered_json::array()}});
  });
  return 0;
}
