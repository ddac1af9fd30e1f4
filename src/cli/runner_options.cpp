#include "cli/runner_options.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/backend_select.h"
#include "util/error.h"

namespace rf::cli {

void RunnerFlags::add_to(CLI::App& command) {
  command.add_option("-m,--model", model, "Model: a Hugging Face folder or a .gguf file (default: the bundled demo model)");
  add_device_option(command, options);
  command.add_option("-t,--threads", options.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  command.add_option("-c,--ctx-size,--ctx", options.ctx_size, "Context size in tokens (0: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("-b,--batch-size", options.max_batch_tokens, "Prompt tokens per forward step")
      ->check(CLI::PositiveNumber);
  add_batch_invariant_flag(command, options);
}

void add_device_option(CLI::App& command, RunnerOptions& options) {
  const CLI::Validator device_value(
      [](std::string& value) {
        try {
          parse_device(value);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      "DEVICE");
  command.add_option("--device", options.device, "auto, cpu, cuda or rocm (the first GPU), cuda:N or rocm:N (GPU N)")
      ->check(device_value);
}

void add_batch_invariant_flag(CLI::App& command, RunnerOptions& options) {
  command.add_flag("--batch-invariant", options.batch_invariant,
                   "GPU: a request's tokens exactly as it gets them alone, whatever it is batched with (slower "
                   "prefill and long contexts; the CPU always works so)");
}

std::string default_model_path() {
  if (const char* env = std::getenv("ROCMFORGE_MODEL"); env && *env) return env;
  return ROCMFORGE_DEFAULT_MODEL;
}

std::string default_image_model_path() {
  if (const char* env = std::getenv("ROCMFORGE_IMAGE_MODEL"); env && *env) return env;
  return ROCMFORGE_DEFAULT_IMAGE_MODEL;
}

std::unique_ptr<ModelRunner> RunnerFlags::load() const {
  return std::make_unique<ModelRunner>(model.empty() ? default_model_path() : model, options);
}

}  // namespace rf::cli
