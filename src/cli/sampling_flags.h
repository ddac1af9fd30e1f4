#pragma once
// The sampling options of the commands that generate (generate, chat), with llama.cpp's names.
// What the user does not give comes from the model's generation_config.json, then from
// llama.cpp's defaults.
#include <CLI/CLI.hpp>

#include "model/checkpoint.h"
#include "model/sampling.h"

namespace rf::cli {

class SamplingFlags {
 public:
  void add_to(CLI::App& command);
  // Throws rf::Error for values out of range (before a model is loaded for nothing).
  void check() const { given_.validate(); }
  // The parameters given, the model's defaults for the rest, a random seed unless one was given.
  SamplingParams resolve(const GenerationDefaults& defaults) const;

 private:
  SamplingParams given_;
  CLI::Option* temperature_ = nullptr;
  CLI::Option* top_k_ = nullptr;
  CLI::Option* top_p_ = nullptr;
  CLI::Option* min_p_ = nullptr;
  CLI::Option* repetition_penalty_ = nullptr;
  CLI::Option* seed_ = nullptr;
};

}  // namespace rf::cli
