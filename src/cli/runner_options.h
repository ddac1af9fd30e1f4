#pragma once
// Options shared by the commands that load and run a model.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/model_runner.h"

namespace rf::cli {

// $ROCMFORGE_MODEL, else the demo model shipped in the source tree (models/kjv-llama).
std::string default_model_path();

// Throws for a --device this build has no backend for.
void check_device(const std::string& device);

struct RunnerFlags {
  std::string model;
  std::string device = "auto";
  RunnerOptions options;

  void add_to(CLI::App& command);
  // Resolves --device (falling back to the CPU with a notice for auto) and loads the model.
  std::unique_ptr<ModelRunner> load() const;
};

}  // namespace rf::cli
