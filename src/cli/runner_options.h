#pragma once
// Options shared by the commands that load and run a model.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/model_runner.h"

namespace rf::cli {

// $ROCMFORGE_MODEL, else the demo model shipped in the source tree (models/kjv-llama).
std::string default_model_path();

// `rocmforge image` without -m: $ROCMFORGE_IMAGE_MODEL, else the Stable Diffusion demo model
// shipped in the source tree (models/sd-demo).
std::string default_image_model_path();

// --device, checked by engine/backend_select.h's parse_device; for RunnerFlags and bench.
void add_device_option(CLI::App& command, RunnerOptions& options);

// --gpu-memory (engine/backend_select.h's bound_gpu_memory), applied as it is parsed; for RunnerFlags
// and the image commands.
void add_gpu_memory_option(CLI::App& command);

// --batch-invariant, for RunnerFlags and for bench, which takes its runner options one by one.
void add_batch_invariant_flag(CLI::App& command, RunnerOptions& options);

// --tensor-parallel (-tp) and --devices, for RunnerFlags and bench.
void add_parallel_options(CLI::App& command, RunnerOptions& options);

struct RunnerFlags {
  std::string model;
  RunnerOptions options;

  void add_to(CLI::App& command);
  // Loads the model on the --device asked for (see engine/backend_select.h), with a progress bar
  // on a terminal, else progress lines through `log` (stderr's when empty).
  std::unique_ptr<ModelRunner> load(ProgressMeter::Write log = {}) const;
};

}  // namespace rf::cli
