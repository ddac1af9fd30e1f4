#pragma once
// Decoding ahead (ForwardPass::queue_sample) against step-by-step sampling on one backend: the same
// sequences decode twice, in KV cache blocks of their own, once through sample() with the tokens on
// the host and once queued a step ahead with previous_token()s; every backend must give both the
// same tokens. Shared by the CPU (engine) and GPU tests.
#include <cstdint>
#include <vector>

#include "engine/sampler.h"
#include "model/batch.h"
#include "model/forward_pass.h"

namespace rf::test {

struct DecodeTraces {
  std::vector<std::vector<std::int32_t>> step_by_step, ahead;  // per step, per sequence
};

// `first.size()` sequences from position 0 for `steps` steps (at most blocks_per_sequence * block_size),
// each with a sampler of `params` (no penalties); the backend needs 2 * first.size() * blocks_per_sequence blocks.
inline DecodeTraces decode_both_ways(ForwardPass& backend, const std::vector<std::int32_t>& first, int steps,
                                     const SamplingParams& params, int blocks_per_sequence) {
  const int n = static_cast<int>(first.size());
  auto batch_for = [&](int copy, const std::vector<std::int32_t>& tokens, int position) {
    Batch batch;
    for (int s = 0; s < n; ++s) {
      std::vector<std::int32_t> table(blocks_per_sequence);
      for (int b = 0; b < blocks_per_sequence; ++b) table[b] = (copy * n + s) * blocks_per_sequence + b;
      batch.block_tables.push_back(table);
      batch.add_sequence(s, &tokens[s], 1, position, true);
    }
    return batch;
  };
  auto rows_for = [&](std::vector<Sampler>& samplers) {
    std::vector<SampleRow> rows;
    for (auto& sampler : samplers) rows.push_back({sampler, {}});
    return rows;
  };

  DecodeTraces traces;
  std::vector<Sampler> samplers(n, Sampler(params));
  const auto rows = rows_for(samplers);
  std::vector<std::int32_t> tokens = first;
  for (int step = 0; step < steps; ++step) {
    tokens = backend.sample(batch_for(0, tokens, step), rows);
    traces.step_by_step.push_back(tokens);
  }

  std::vector<Sampler> ahead_samplers(n, Sampler(params));
  const auto ahead_rows = rows_for(ahead_samplers);
  std::vector<std::int32_t> previous(n);
  for (int s = 0; s < n; ++s) previous[s] = previous_token(s);
  for (int step = 0; step < steps; ++step) {
    backend.queue_sample(batch_for(1, step == 0 ? first : previous, step), ahead_rows);
    if (step > 0) traces.ahead.push_back(backend.take_tokens());
  }
  traces.ahead.push_back(backend.take_tokens());
  return traces;
}

}  // namespace rf::test
