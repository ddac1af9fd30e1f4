#pragma once
// Random-weight models of real shapes, built in memory, so benchmarks need no multi-GB file.
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "model/checkpoint.h"

namespace rf {

// Known shape names: llama3-1b, llama3-8b, llama3-70b, qwen3-8b, mistral-7b, gemma2-2b, gemma3-4b, mixtral-8x7b,
// qwen3-30b-a3b.
std::vector<std::string> synthetic_model_names();
ModelConfig synthetic_model_config(const std::string& name);  // throws for an unknown name

// Weights in `dtype` (norms in f32). Each matrix repeats a few distinct random rows: every byte
// is still read per token, and building an 8B model takes seconds instead of minutes.
Checkpoint build_synthetic_model(const std::string& name, DType dtype, std::uint64_t seed);
// The same for any configuration (a test's small model with a real vocabulary, say), its path
// "synthetic NAME".
Checkpoint build_synthetic_model(const ModelConfig& config, DType dtype, std::uint64_t seed, const std::string& name);

}  // namespace rf
