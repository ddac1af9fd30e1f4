#pragma once
// What a backend tells RunnerOptions::load_progress while it loads: rising counts of bytes that end
// at every matrix's bytes (the matrices read in on the CPU, uploaded on the GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model_runner.h"
#include "models/llama/weights.h"

namespace rf {

inline void expect_load_progress_to_every_byte(const std::string& device) {
  const std::string model = std::string(ROCMFORGE_FIXTURES) + "/models/llama3/model.q4_k_m.gguf";
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  RunnerOptions options{.threads = 1, .ctx_size = 64, .device = device};
  options.load_progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const ModelRunner runner(model, options);
  const std::uint64_t bytes = llama::matrix_bytes(runner.checkpoint().weights(), runner.config());
  std::size_t matrices = 0;
  llama::for_each_matrix(runner.checkpoint().weights(), runner.config(), [&](const WeightMatrix&) { ++matrices; });
  ASSERT_EQ(calls.size(), matrices);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, bytes);
    if (i > 0) EXPECT_GT(calls[i].first, calls[i - 1].first);
  }
  EXPECT_EQ(calls.back().first, bytes);
  std::printf("%s: %zu progress calls, the last at %llu of %llu bytes\n", device.c_str(), calls.size(),
              static_cast<unsigned long long>(calls.back().first), static_cast<unsigned long long>(bytes));
}

}  // namespace rf
