#pragma once
// Turns a row of logits into the next token on the host, llama.cpp-style: penalties on recent
// tokens, then top-k, top-p and min-p filtering, then temperature and a seeded draw (see
// model/sampling.h). Temperature <= 0 is greedy.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "model/sampling.h"

namespace rf {

class Sampler : public TokenSampler {
 public:
  explicit Sampler(const SamplingParams& params);

  const SamplingParams& params() const override { return params_; }
  // `logits` is modified (penalties, temperature). `history` is the sequence so far (prompt included).
  std::int32_t sample(std::span<float> logits, std::span<const std::int32_t> history) override;
  std::uint64_t next_draw() override { return device_draws_++; }

  // What sample() draws from when temperature > 0: the tokens left after the penalties and the
  // filters, with their probabilities, most likely first. `logits` is modified as by sample().
  std::vector<std::pair<std::int32_t, double>> distribution(std::span<float> logits,
                                                            std::span<const std::int32_t> history);

 private:
  // logit_bias, then the penalties.
  void adjust_logits(std::span<float> logits, std::span<const std::int32_t> history) const;
  // Leaves the surviving tokens in candidates_, most likely first, and returns their weights at temperature.
  std::vector<double> filtered_weights(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::uint64_t device_draws_ = 0;
  std::vector<std::pair<float, std::int32_t>> candidates_;
};

}  // namespace rf
