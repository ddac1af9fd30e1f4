#pragma once
// Turns a row of logits into the next token, llama.cpp-style: penalties on recent tokens, then
// top-k, top-p and min-p filtering, then temperature and a seeded draw. Temperature <= 0 is greedy.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace rf {

struct SamplingParams {
  double temperature = 0.8;
  int top_k = 40;        // <= 0: off
  double top_p = 0.95;   // >= 1: off
  double min_p = 0.05;   // <= 0: off
  double repetition_penalty = 1.0;  // 1: off; divides positive logits, multiplies negative ones
  int penalty_last_n = 64;          // how many recent tokens the penalties look at (-1: all)
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::uint64_t seed = 0;

  // Throws rf::Error naming the first out-of-range value.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `logits` is modified (penalties, temperature). `history` is the sequence so far (prompt included).
  std::int32_t sample(std::span<float> logits, std::span<const std::int32_t> history);

 private:
  void apply_penalties(std::span<float> logits, std::span<const std::int32_t> history) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, std::int32_t>> candidates_;
};

}  // namespace rf
