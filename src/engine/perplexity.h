#pragma once
// Scoring a token sequence: its perplexity, or its logits at every position.
//
// Perplexity: The text is cut into consecutive windows of `window` tokens
// (one window, as Hugging Face scores it, when it fits); in each window every token after the
// first is scored given the earlier tokens of that window.
#include <cstdint>
#include <vector>

namespace rf {

class ModelRunner;

struct PerplexityResult {
  double perplexity = 0;
  double mean_nll = 0;
  std::size_t scored_tokens = 0;
  int windows = 0;
  int window = 0;
};

PerplexityResult perplexity(ModelRunner& runner, const std::vector<std::int32_t>& ids, int window);

// The logits at every position of `ids` (rows of vocab_size floats), the whole sequence run as one
// batch from position 0: what the reference tests compare against other implementations.
std::vector<float> prompt_logits(ModelRunner& runner, const std::vector<std::int32_t>& ids);

}  // namespace rf
