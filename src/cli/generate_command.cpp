#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "cli/sampling_flags.h"
#include "engine/generate.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "util/error.h"
#include "util/text_file.h"

namespace rf::cli {

namespace {

struct GenerateFlags {
  RunnerFlags runner;
  std::string prompt;
  std::string prompt_file;
  int max_tokens = 256;
  bool ignore_eos = false;
  bool no_special = false;
  std::vector<std::string> stop;
  std::string grammar, grammar_file, json_schema, json_schema_file;
  SamplingFlags sampling;
};

// The prompt: -p TEXT, -p - (standard input) or -f FILE, read whole.
std::string prompt_text(const GenerateFlags& f) {
  if (f.prompt.empty() == f.prompt_file.empty()) fail("give the prompt as -p TEXT, -p - (standard input) or -f FILE");
  if (f.prompt == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  return f.prompt_file.empty() ? f.prompt : read_text_file(f.prompt_file);
}

// --grammar / --grammar-file (GBNF) or --json-schema / --json-schema-file, as GBNF; empty: none.
std::string grammar_text(const GenerateFlags& f) {
  if (!f.grammar.empty()) return f.grammar;
  if (!f.grammar_file.empty()) return read_text_file(f.grammar_file);
  const std::string schema = !f.json_schema_file.empty() ? read_text_file(f.json_schema_file) : f.json_schema;
  if (schema.empty()) return {};
  try {
    return grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema));
  } catch (const nlohmann::json::exception& e) {
    fail("the JSON schema is not valid JSON: {}", e.what());
  }
}

void run(GenerateFlags& f) {
  f.sampling.check();
  const std::string text = prompt_text(f);
  const std::string gbnf = grammar_text(f);
  auto grammar = gbnf.empty() ? std::optional<grammar::Grammar>{} : grammar::parse_gbnf(gbnf);
  auto runner = f.runner.load();
  const auto prompt = runner->tokenizer().encode(text, !f.no_special);
  GenerateOptions options;
  options.max_tokens = f.max_tokens;
  options.stop = f.stop;
  options.ignore_eos = f.ignore_eos;
  options.sampling = f.sampling.resolve(runner->checkpoint().generation_defaults());
  if (grammar) options.grammar = std::make_shared<grammar::TokenGrammar>(std::move(*grammar), runner->grammar_vocabulary());
  const auto result = generate(*runner, prompt, options, [](std::string_view text) {
    fmt::print("{}", text);
    std::fflush(stdout);
  });
  fmt::print("\n");
  const auto rate = [](std::size_t tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  fmt::print(stderr, "prompt: {} tokens in {:.3f} s ({:.2f} tokens/s)\n", result.prompt_tokens, result.prompt_seconds,
             rate(result.prompt_tokens, result.prompt_seconds));
  fmt::print(stderr, "generation: {} tokens in {:.3f} s ({:.2f} tokens/s), stopped by {}\n", result.tokens.size(),
             result.generate_seconds, rate(result.tokens.size(), result.generate_seconds),
             result.finish == FinishReason::Stop ? "end of text or a stop string" : "the token limit");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto flags = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming it as it is produced");
  flags->runner.add_to(*cmd);
  cmd->add_option("-p,--prompt", flags->prompt, "The prompt text (-: read it from standard input)");
  cmd->add_option("-f,--file", flags->prompt_file, "Read the prompt from this file");
  cmd->add_option("-n,--max-tokens", flags->max_tokens, "Tokens to generate at most (-1: until the context is full)")
      ->check(CLI::Range(-1, 1 << 30));
  flags->sampling.add_to(*cmd);
  cmd->add_option("--stop", flags->stop, "Stop when this string is generated (repeatable)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "Keep generating past the end-of-text token");
  cmd->add_flag("--no-special", flags->no_special, "Do not add BOS/EOS to the prompt");
  auto* grammar = cmd->add_option("--grammar", flags->grammar, "Constrain the output to this GBNF grammar (llama.cpp's notation)");
  auto* grammar_file = cmd->add_option("--grammar-file", flags->grammar_file, "Constrain the output to the GBNF grammar in this file");
  auto* schema = cmd->add_option("-j,--json-schema", flags->json_schema, "Constrain the output to JSON valid under this schema");
  auto* schema_file = cmd->add_option("--json-schema-file", flags->json_schema_file, "The same, the schema read from this file");
  grammar->excludes(grammar_file)->excludes(schema)->excludes(schema_file);
  grammar_file->excludes(schema)->excludes(schema_file);
  schema->excludes(schema_file);
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
