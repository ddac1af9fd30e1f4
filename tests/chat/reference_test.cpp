// Real chat templates against @huggingface/jinja: every rendering in
// tests/fixtures/chat/reference.jsonl (written by tools/chat/render_reference.mjs; Python jinja2
// with transformers' settings gives the same output for each) must come out byte for byte, or
// fail with the message the template raised.
#include <map>
#include <vector>

#include "chat_test_support.h"

namespace rf::test {
namespace {

struct Rendering {
  std::string name;  // for the test's name
  nlohmann::ordered_json record;
};

std::vector<Rendering> load_renderings() {
  std::vector<Rendering> renderings;
  std::istringstream lines(read_repository_file("tests/fixtures/chat/reference.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    auto record = nlohmann::ordered_json::parse(line);
    std::string path = record["template"];
    // tests/fixtures/chat/qwen3.jinja -> qwen3; models/kjv-llama/tokenizer_config.json -> kjv_llama
    path = path.substr(0, path.rfind(path.ends_with(".json") ? '/' : '.'));
    std::string name = std::to_string(renderings.size()) + "_" + path.substr(path.rfind('/') + 1) + "_" +
                       record["conversation"].get<std::string>() + (record["extra"].empty() ? "" : "_extra") +
                       (record["add_generation_prompt"] ? "_prompt" : "");
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    renderings.push_back({std::move(name), std::move(record)});
  }
  return renderings;
}

const ChatTemplate& template_at(const std::string& path) {
  static std::map<std::string, ChatTemplate> parsed;
  auto found = parsed.find(path);
  if (found == parsed.end()) {
    const std::string text = read_repository_file(path);
    const std::string source =
        path.ends_with(".json") ? nlohmann::json::parse(text)["chat_template"].get<std::string>() : text;
    found = parsed.emplace(path, ChatTemplate::parse(source)).first;
  }
  return found->second;
}

const nlohmann::ordered_json& conversations() {
  static const auto all = nlohmann::ordered_json::parse(read_repository_file("tests/fixtures/chat/conversations.json"));
  return all;
}

void PrintTo(const Rendering& rendering, std::ostream* out) { *out << rendering.name; }

class ChatReference : public testing::TestWithParam<Rendering> {};

TEST_P(ChatReference, MatchesHuggingFaceJinja) {
  const nlohmann::ordered_json& record = GetParam().record;
  const nlohmann::ordered_json& conversation = conversations().at(record["conversation"].get<std::string>());
  nlohmann::ordered_json extra = record["extra"];
  if (conversation.contains("tools")) extra["tools"] = conversation["tools"];
  const auto token = [&](const char* key) { return record[key].is_string() ? record[key].get<std::string>() : ""; };
  const auto render = [&] {
    return render_chat(template_at(record["template"]), conversation["messages"], record["add_generation_prompt"],
                       token("bos_token"), token("eos_token"), extra);
  };
  if (record.contains("expected")) {
    EXPECT_EQ(render(), record["expected"].get<std::string>());
  } else {
    try {
      ADD_FAILURE() << "expected the error '" << record["error"].get<std::string>() << "', got: " << render();
    } catch (const Error& error) {
      EXPECT_EQ(error.what(), record["error"].get<std::string>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChatReference, testing::ValuesIn(load_renderings()),
                         [](const testing::TestParamInfo<Rendering>& info) { return info.param.name; });

TEST(ChatReferenceFile, CoversEveryTemplate) {
  std::map<std::string, int> per_template;
  for (const Rendering& rendering : load_renderings()) ++per_template[rendering.record["template"]];
  EXPECT_EQ(per_template.size(), 14u);
  for (const auto& [path, count] : per_template) EXPECT_GE(count, 22) << path;
}

}  // namespace
}  // namespace rf::test
