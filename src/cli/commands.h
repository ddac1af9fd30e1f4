#pragma once
// Each sub-command registers its options and its action on the app.
#include <CLI/CLI.hpp>

namespace rf::cli {

void add_generate_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_image_command(CLI::App& app);
void add_bench_image_command(CLI::App& app);

}  // namespace rf::cli
