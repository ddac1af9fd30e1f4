#include <filesystem>
#include <iostream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace rf::cli {

namespace {

struct TokenizeFlags {
  std::string model;
  bool jsonl = false;
  bool no_special = false;
};

// A tokenizer.json, a model folder holding one, or a GGUF file's embedded vocabulary.
Tokenizer load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return Tokenizer::from_json_file((fs::path(path) / "tokenizer.json").string());
  if (fs::path(path).extension() == ".json") return Tokenizer::from_json_file(path);
  return Tokenizer::from_gguf(GgufFile(path));
}

void run(const TokenizeFlags& f) {
  const Tokenizer tokenizer = load_tokenizer(f.model.empty() ? default_model_path() : f.model);
  if (!f.jsonl) {
    const std::string text(std::istreambuf_iterator<char>(std::cin), {});
    fmt::print("[{}]\n", fmt::join(tokenizer.encode(text, !f.no_special), ", "));
    return;
  }
  std::string line;
  for (int number = 1; std::getline(std::cin, line); ++number) {
    nlohmann::json text;
    try {
      text = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("standard input, line {}: invalid JSON: {}", number, e.what());
    }
    if (!text.is_string()) fail("standard input, line {}: expected a JSON string", number);
    fmt::print("{}\n", nlohmann::json(tokenizer.encode(text.get<std::string>(), false)).dump());
  }
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of standard input");
  cmd->add_option("-m,--model", flags->model, "A model folder, a .gguf file or a tokenizer.json (default: the bundled demo model)");
  cmd->add_flag("--jsonl", flags->jsonl, "Each input line is a JSON string; print one JSON array of ids per line (no BOS/EOS)");
  cmd->add_flag("--no-special", flags->no_special, "Do not add BOS/EOS");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
