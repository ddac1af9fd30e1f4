#pragma once
// What a sequence asks of sampling, as every backend sees it: llama.cpp's chain (penalties on
// recent tokens, top-k, top-p, min-p, temperature, a seeded draw; temperature <= 0 is greedy),
// and the sequence's sampler, whose random stream continues from one step to the next.
#include <cstdint>
#include <span>
#include <utility>
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
  // Added to these tokens' logits before anything else (OpenAI's logit_bias: -100 to 100, where
  // -100 bans a token and 100 all but forces it). Only the host sampler applies it: a backend that
  // samples on its device leaves such rows to the host.
  std::vector<std::pair<std::int32_t, float>> logit_bias;

  // Throws rf::Error naming the first out-of-range value.
  void validate() const;
};

// Constrained decoding's mask (grammar/token_constraint.h): one bit per token id, set where the
// token may come next. Every logit it does not allow becomes -infinity, before anything else.
void mask_logits(std::span<float> logits, std::span<const std::uint64_t> allowed);

// Whether the penalties are on (some history would change the logits).
bool penalises(const SamplingParams& params);

// The end of `history` the penalties look at: empty when they are off.
std::span<const std::int32_t> penalty_window(const SamplingParams& params, std::span<const std::int32_t> history);

// One sequence's sampler. The host implementation is engine/sampler.h's; a backend that samples on
// its device reads the parameters and draws from a counter-based generator keyed by the seed.
class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  virtual const SamplingParams& params() const = 0;
  // Picks from one row of host logits (modified: penalties, temperature); `history` is the sequence
  // so far, prompt included.
  virtual std::int32_t sample(std::span<float> logits, std::span<const std::int32_t> history) = 0;
  // The counter of the device's next draw for this sequence (then advances it).
  virtual std::uint64_t next_draw() = 0;
};

}  // namespace rf
