#include "model/forward_pass.h"

#include <algorithm>

#include "util/error.h"

namespace rf {

void ForwardPass::check_rows(const Batch& batch, std::span<const SampleRow> rows) {
  if (rows.size() != batch.logit_rows.size()) fail("{} sampling rows for {} logit rows", rows.size(), batch.logit_rows.size());
}

std::vector<std::int32_t> ForwardPass::sample(const Batch& batch, std::span<const SampleRow> rows) {
  check_rows(batch, rows);
  std::vector<float> logits;
  forward(batch, logits);
  const std::size_t vocab = rows.empty() ? 0 : logits.size() / rows.size();
  std::vector<std::int32_t> tokens;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto row = std::span(logits).subspan(r * vocab, vocab);
    if (!rows[r].allowed.empty()) mask_logits(row, rows[r].allowed);
    tokens.push_back(rows[r].sampler.sample(row, rows[r].history));
  }
  return tokens;
}

void ForwardPass::check_queued(const Batch& batch, std::span<const SampleRow> rows, int steps_in_flight) {
  if (steps_in_flight >= kStepsInFlight) fail("at most {} decode steps may be queued and not yet taken", kStepsInFlight);
  check_rows(batch, rows);
  const bool ahead = std::any_of(batch.tokens.begin(), batch.tokens.end(), [](std::int32_t t) { return t < 0; });
  if (!ahead) return;
  for (const auto& row : rows) {
    if (penalises(row.sampler.params())) fail("a row with penalties cannot decode ahead: its window would miss a token");
  }
}

void ForwardPass::queue_sample(const Batch& batch, std::span<const SampleRow> rows) {
  check_queued(batch, rows, static_cast<int>(queued_.size()));
  Batch resolved = batch;
  for (auto& token : resolved.tokens) {
    if (token < 0 && -1 - token < static_cast<int>(last_queued_.size())) token = last_queued_[-1 - token];
  }
  last_queued_ = sample(resolved, rows);  // its check_batch rejects the previous_token()s left
  queued_.push_back(last_queued_);
}

std::vector<std::int32_t> ForwardPass::take_tokens() {
  if (queued_.empty()) fail("no decode step is queued");
  auto tokens = std::move(queued_.front());
  queued_.pop_front();
  return tokens;
}

}  // namespace rf
