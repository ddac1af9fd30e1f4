#include "model/forward_pass.h"

#include "util/error.h"

namespace rf {

std::vector<std::int32_t> ForwardPass::sample(const Batch& batch, std::span<const SampleRow> rows) {
  if (rows.size() != batch.logit_rows.size()) fail("{} sampling rows for {} logit rows", rows.size(), batch.logit_rows.size());
  std::vector<float> logits;
  forward(batch, logits);
  const std::size_t vocab = rows.empty() ? 0 : logits.size() / rows.size();
  std::vector<std::int32_t> tokens;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    tokens.push_back(rows[r].sampler.sample(std::span(logits).subspan(r * vocab, vocab), rows[r].history));
  }
  return tokens;
}

}  // namespace rf
