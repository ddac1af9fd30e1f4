#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace rf {

TokenLogprobs token_logprobs(std::span<const float> logits, std::int32_t chosen, int top_n) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_norm = max + static_cast<float>(std::log(sum));
  TokenLogprobs out{{chosen, logits[chosen] - log_norm}, {}};
  const std::size_t n = std::min<std::size_t>(std::max(top_n, 0), logits.size());
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                    [&](auto a, auto b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (std::size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logits[ids[i]] - log_norm});
  return out;
}

}  // namespace rf
