#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "util/error.h"

namespace rf {

namespace {
// -log softmax(row)[target], in double.
double negative_log_likelihood(const float* row, std::size_t vocab, std::int32_t target) {
  const float max = *std::max_element(row, row + vocab);
  double sum = 0;
  for (std::size_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  return std::log(sum) + max - row[target];
}
}  // namespace

PerplexityResult perplexity(ModelRunner& runner, const std::vector<std::int32_t>& ids, int window) {
  if (window < 2) fail("the perplexity window must hold at least 2 tokens, got {}", window);
  if (window > runner.ctx_size()) fail("the perplexity window ({}) is larger than the context ({})", window, runner.ctx_size());
  if (ids.size() < 2) fail("the text has {} token(s); perplexity needs at least 2", ids.size());
  const std::size_t vocab = runner.config().vocab_size;
  PerplexityResult result;
  result.window = window;
  double total_nll = 0;
  std::vector<float> logits;
  for (std::size_t start = 0; start + 1 < ids.size(); start += window) {
    const std::size_t len = std::min<std::size_t>(window, ids.size() - start);
    SequenceBlocks blocks(runner.blocks(), ModelRunner::kBlockSize);
    for_each_chunk(std::span(ids).subspan(start, len), runner.max_batch_tokens(), blocks, ChunkLogits::All,
                   [&](const Batch& batch, std::size_t begin, std::size_t count) {
                     runner.forward(batch, logits);
                     // The logits at window position p predict the token at p + 1.
                     for (std::size_t i = 0; i < count && begin + i + 1 < len; ++i) {
                       total_nll += negative_log_likelihood(&logits[i * vocab], vocab, ids[start + begin + i + 1]);
                       ++result.scored_tokens;
                     }
                   });
    ++result.windows;
  }
  result.mean_nll = total_nll / static_cast<double>(result.scored_tokens);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

std::vector<float> prompt_logits(ModelRunner& runner, const std::vector<std::int32_t>& ids) {
  SequenceBlocks blocks(runner.blocks(), ModelRunner::kBlockSize);
  blocks.reserve(static_cast<int>(ids.size()));
  Batch batch;
  batch.block_tables.push_back(blocks.table());
  batch.add_sequence(0, ids.data(), ids.size(), 0, false, true);
  std::vector<float> logits(ids.size() * runner.config().vocab_size, std::nanf(""));  // NaN: a row left unwritten shows
  runner.forward(batch, logits);
  return logits;
}

}  // namespace rf
