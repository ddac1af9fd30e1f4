#include "engine/active_sequence.h"

#include <algorithm>

#include "util/error.h"

namespace rf {

ActiveSequence::ActiveSequence(GenerationRequest request, std::shared_ptr<RequestChannel> channel,
                               const Tokenizer& tokenizer, int max_context)
    : tokens(request.prompt),
      request_(std::move(request)),
      channel_(std::move(channel)),
      prompt_tokens_(tokens.size()),
      max_tokens_(max_context - tokens.size()),
      sampler_(request_.options.sampling),
      stops_(request_.options.stop),
      decoder_(tokenizer, true, request_.options.shown_special_tokens) {
  if (request_.options.max_tokens >= 0) max_tokens_ = std::min<std::size_t>(max_tokens_, request_.options.max_tokens);
  if (request_.options.grammar) constraint_.emplace(request_.options.grammar);
}

void ActiveSequence::prepare_constraint() {
  try {
    allowed_ = constraint_->allowed();
  } catch (const std::exception& e) {  // on a pool thread, which must not throw
    allowed_.reset();
    fail(e.what());
  }
}

std::span<const std::uint64_t> ActiveSequence::allowed_tokens() const {
  return allowed_ ? allowed_->words() : std::span<const std::uint64_t>{};
}

bool ActiveSequence::advance(std::int32_t token, std::optional<TokenLogprobs> logprobs,
                             const std::vector<std::int32_t>& stop_ids) {
  ++sampled_;
  // A grammar ends where it may, whatever ignore_eos says: nothing else could follow.
  if ((!request_.options.ignore_eos || constraint_) && std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    finish(FinishReason::Stop, stops_.push(decoder_.flush()) + stops_.flush());
    return true;
  }
  if (constraint_) {
    try {
      constraint_->accept(token);
    } catch (const Error& e) {
      fail(e.what());
      return true;
    }
  }
  tokens.push_back(token);
  std::string text = stops_.push(decoder_.push(token));
  const bool stopped = stops_.stopped() || (constraint_ && constraint_->complete());
  const bool at_limit = !stopped && generated() >= max_tokens_;
  if (at_limit) text += stops_.push(decoder_.flush()) + stops_.flush();
  channel_->push({.kind = StreamEvent::Kind::Text, .text = std::move(text), .token = token, .logprobs = std::move(logprobs)});
  if (stopped || at_limit) finish(stopped ? FinishReason::Stop : FinishReason::Length, {});
  return stopped || at_limit;
}

void ActiveSequence::finish(FinishReason reason, std::string tail) {
  if (!tail.empty()) channel_->push({.kind = StreamEvent::Kind::Text, .text = std::move(tail)});
  channel_->push({.kind = StreamEvent::Kind::Finished,
                  .finish = reason,
                  .usage = {prompt_tokens_, sampled_, cached_prompt_tokens}});
}

void ActiveSequence::fail(const std::string& message) {
  failed_ = true;
  channel_->push({.kind = StreamEvent::Kind::Failed, .text = message});
}

}  // namespace rf
