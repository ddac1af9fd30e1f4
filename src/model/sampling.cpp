#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace rf {

void SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) fail("temperature must be >= 0, got {}", temperature);
  if (!(top_p > 0 && top_p <= 1)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0 && min_p <= 1)) fail("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) {
    fail("repetition penalty must be > 0, got {}", repetition_penalty);
  }
  if (!std::isfinite(presence_penalty) || !std::isfinite(frequency_penalty)) fail("penalties must be finite");
  if (penalty_last_n < -1) fail("penalty window must be >= -1, got {}", penalty_last_n);
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) fail("logit_bias names token {}, which is not a token id", token);
    if (!(bias >= -100 && bias <= 100)) fail("logit_bias of token {} must be in [-100, 100], got {}", token, bias);
  }
}

void mask_logits(std::span<float> logits, std::span<const std::uint64_t> allowed) {
  for (std::size_t id = 0; id < logits.size(); ++id) {
    const bool allows = id / 64 < allowed.size() && (allowed[id / 64] >> (id % 64)) & 1;
    if (!allows) logits[id] = -std::numeric_limits<float>::infinity();
  }
}

bool penalises(const SamplingParams& params) {
  const bool any = params.repetition_penalty != 1.0 || params.presence_penalty != 0.0 || params.frequency_penalty != 0.0;
  return any && params.penalty_last_n != 0;
}

std::span<const std::int32_t> penalty_window(const SamplingParams& params, std::span<const std::int32_t> history) {
  if (!penalises(params)) return {};
  std::size_t window = history.size();
  if (params.penalty_last_n > 0) window = std::min<std::size_t>(window, params.penalty_last_n);
  return history.subspan(history.size() - window);
}

}  // namespace rf
