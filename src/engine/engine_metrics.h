#pragma once
// What the scheduler counts as it runs, read by other threads (the server's /metrics).
#include <atomic>
#include <cstdint>

#include "util/histogram.h"

namespace rf {

struct EngineMetrics {
  // Totals.
  std::atomic<std::uint64_t> requests_finished{0};
  std::atomic<std::uint64_t> requests_cancelled{0};
  std::atomic<std::uint64_t> requests_failed{0};
  std::atomic<std::uint64_t> prompt_tokens{0};
  std::atomic<std::uint64_t> cached_prompt_tokens{0};
  std::atomic<std::uint64_t> generated_tokens{0};
  std::atomic<std::uint64_t> embedded_tokens{0};  // tokens of finished embeddings
  std::atomic<std::uint64_t> preemptions{0};
  std::atomic<std::uint64_t> steps{0};
  // The state after the last step.
  std::atomic<int> waiting{0};
  std::atomic<int> running{0};
  std::atomic<int> kv_blocks_total{0};
  std::atomic<int> kv_blocks_used{0};    // referenced by a sequence
  std::atomic<int> kv_blocks_cached{0};  // in the prefix cache, referenced or not
  // Distributions.
  Histogram batch_tokens{{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}};
  Histogram time_to_first_token{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram inter_token_latency{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
  Histogram request_latency{{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}};
  // A step's work on its grammars' masks (constrained decoding), on the steps that have any.
  Histogram grammar_masks{{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25}};
};

}  // namespace rf
