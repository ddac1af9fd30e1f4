#pragma once
// Log-probabilities of a token and of the most likely alternatives under one row of logits, as
// the OpenAI API's logprobs report them (the model's distribution, before any sampling filter).
#include <cstdint>
#include <span>

#include "engine/request.h"

namespace rf {

TokenLogprobs token_logprobs(std::span<const float> logits, std::int32_t chosen, int top_n);

}  // namespace rf
