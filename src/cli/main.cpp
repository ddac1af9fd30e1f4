// rocmforge: run Llama-family models on AMD and NVIDIA GPUs or the CPU.
#include <cstdio>
#include <string_view>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "engine/backend_select.h"
#include "util/error.h"

namespace {

// vLLM's spelling of --tensor-parallel, -tp, which CLI11 (one letter after a single dash) cannot take.
void accept_vllm_spellings(int argc, char** argv) {
  static char tensor_parallel[] = "--tensor-parallel";
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "-tp") argv[i] = tensor_parallel;
  }
}

}  // namespace

int main(int argc, char** argv) {
  accept_vllm_spellings(argc, argv);
  CLI::App app{"rocmforge: Llama-family inference on ROCm, CUDA and the CPU"};
  app.set_version_flag("--version", fmt::format("rocmforge {} ({} build; backends: {})", ROCMFORGE_VERSION,
                                                ROCMFORGE_BUILD_TYPE, fmt::join(rf::built_backends(), ", ")));
  app.require_subcommand(1);
  rf::cli::add_generate_command(app);
  rf::cli::add_chat_command(app);
  rf::cli::add_perplexity_command(app);
  rf::cli::add_tokenize_command(app);
  rf::cli::add_info_command(app);
  rf::cli::add_bench_command(app);
  rf::cli::add_serve_command(app);
  rf::cli::add_image_command(app);
  rf::cli::add_bench_image_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rf::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return 1;
  }
  return 0;
}
