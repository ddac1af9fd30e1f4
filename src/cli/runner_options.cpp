#include "cli/runner_options.h"

#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "engine/backend_select.h"
#include "util/error.h"

namespace rf::cli {

void RunnerFlags::add_to(CLI::App& command) {
  command.add_option("-m,--model", model, "Model: a Hugging Face folder or a .gguf file (default: the bundled demo model)");
  add_device_option(command, options);
  add_gpu_memory_option(command);
  command.add_option("-t,--threads", options.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  command.add_option("-c,--ctx-size,--ctx", options.ctx_size, "Context size in tokens (0: the model's, at most 4096)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("-b,--batch-size", options.max_batch_tokens, "Prompt tokens per forward step")
      ->check(CLI::PositiveNumber);
  add_batch_invariant_flag(command, options);
  add_parallel_options(command, options);
}

namespace {

// A validator from a parser that throws rf::Error: the parser's message is the one CLI11 prints.
template <class Parse>
CLI::Validator validator_of(Parse parse, const std::string& name) {
  return CLI::Validator(
      [parse](std::string& value) {
        try {
          parse(value);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      },
      name);
}

}  // namespace

void add_device_option(CLI::App& command, RunnerOptions& options) {
  command.add_option("--device", options.device, "auto, cpu, cuda or rocm (the first GPU), cuda:N or rocm:N (GPU N)")
      ->check(validator_of(parse_device, "DEVICE"));
}

void add_gpu_memory_option(CLI::App& command) {
  command
      .add_option_function<std::string>(
          "--gpu-memory", [](const std::string& value) { bound_gpu_memory(parse_memory_bound(value)); },
          "The most GPU memory rocmforge's buffers take of the device: a share of it (0.9) or a size (20GiB, "
          "512MiB); a model that does not fit fails at load, a request that would pass it fails alone")
      ->check(validator_of(parse_memory_bound, "SHARE|SIZE"));
}

void add_batch_invariant_flag(CLI::App& command, RunnerOptions& options) {
  command.add_flag("--batch-invariant", options.batch_invariant,
                   "GPU: a request's tokens exactly as it gets them alone, whatever it is batched with (slower "
                   "prefill and long contexts; the CPU always works so)");
}

void add_parallel_options(CLI::App& command, RunnerOptions& options) {
  command
      .add_option("--tensor-parallel,--tp", options.tensor_parallel,
                  "Split the model over this many GPUs (-tp N), through NCCL (RCCL on AMD); on the CPU, over shares "
                  "of the threads (a check of the split, not faster)")
      ->check(CLI::PositiveNumber);
  command
      .add_option_function<std::string>(
          "--devices", [&options](const std::string& value) { options.devices = parse_device_list(value); },
          "The GPUs of --tensor-parallel, by index (0,1); default: as many from --device's")
      ->check(validator_of(parse_device_list, "LIST"));
}

std::string default_model_path() {
  if (const char* env = std::getenv("ROCMFORGE_MODEL"); env && *env) return env;
  return ROCMFORGE_DEFAULT_MODEL;
}

std::string default_image_model_path() {
  if (const char* env = std::getenv("ROCMFORGE_IMAGE_MODEL"); env && *env) return env;
  return ROCMFORGE_DEFAULT_IMAGE_MODEL;
}

// Values that run but make little sense get a word on stderr: threads past the machine's, a context
// past what the model was trained for (its positions beyond are untrained).
std::unique_ptr<ModelRunner> RunnerFlags::load(ProgressMeter::Write log) const {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && options.threads > static_cast<int>(cores)) {
    fmt::print(stderr, "warning: --threads {} is more than this machine's {} hardware threads; the extra ones only wait\n",
               options.threads, cores);
  }
  const std::string path = model.empty() ? default_model_path() : model;
  RunnerOptions with_progress = options;
  const std::filesystem::path name = std::filesystem::path(path).lexically_normal();
  with_progress.load_progress =
      stderr_progress(fmt::format("loading {}", (name.has_filename() ? name : name.parent_path()).filename().string()),
                      std::move(log));
  auto runner = std::make_unique<ModelRunner>(path, with_progress);
  const int trained = runner->config().max_position_embeddings;
  if (trained > 0 && runner->ctx_size() > trained) {
    fmt::print(stderr, "warning: a context of {} tokens is longer than the {} this model was trained for\n",
               runner->ctx_size(), trained);
  }
  return runner;
}

}  // namespace rf::cli
