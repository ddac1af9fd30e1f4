#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/perplexity.h"
#include "util/error.h"
#include "util/text_file.h"

namespace rf::cli {

namespace {

struct PerplexityFlags {
  RunnerFlags runner;
  std::string file;
};

void run(const PerplexityFlags& f) {
  const std::string text = read_text_file(f.file);
  auto runner = f.runner.load();
  const auto ids = runner->tokenizer().encode(text, true);
  const int window = runner->ctx_size();
  const auto result = perplexity(*runner, ids, window);
  if (result.windows == 1) {
    fmt::print("scored {} of {} tokens in one sequence\n", result.scored_tokens, ids.size());
  } else {
    fmt::print("scored {} of {} tokens in {} consecutive windows of {} tokens (the first token of each window is not scored)\n",
               result.scored_tokens, ids.size(), result.windows, window);
  }
  fmt::print("perplexity: {:.6f} (mean negative log-likelihood {:.6f})\n", result.perplexity, result.mean_nll);
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto flags = std::make_shared<PerplexityFlags>();
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text file (windows of --ctx-size tokens)");
  flags->runner.add_to(*cmd);
  cmd->add_option("-f,--file", flags->file, "Text file to score")->required();
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
