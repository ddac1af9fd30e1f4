#pragma once
// One request inside the engine: its tokens so far, its claim on the KV cache, and the sampler,
// detokenizer and stop-string matcher that turn its logits into streamed text. Preemption takes
// its blocks away but keeps the rest, so a resumed sequence goes on exactly where it was.
#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_matcher.h"
#include "grammar/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace rf {

using Clock = std::chrono::steady_clock;

class ActiveSequence {
 public:
  // `max_context`: positions this sequence may use (prompt and generated tokens together).
  ActiveSequence(GenerationRequest request, std::shared_ptr<RequestChannel> channel, const Tokenizer& tokenizer,
                 int max_context);

  std::vector<std::int32_t> tokens;  // the prompt, then what was generated
  std::size_t computed = 0;          // leading tokens whose keys and values are in the cache
  std::vector<std::int32_t> block_table;
  PrefixChain prefix;
  std::size_t cached_prompt_tokens = 0;  // the most the prefix cache ever supplied
  Clock::time_point arrival = Clock::now();
  Clock::time_point last_token_time;

  std::size_t pending() const { return tokens.size() - computed; }
  std::size_t generated() const { return tokens.size() - prompt_tokens_; }
  RequestChannel& channel() { return *channel_; }

  TokenSampler& sampler() { return sampler_; }
  // What the penalties look at: the generated tokens, as OpenAI's presence and frequency penalties count them.
  std::span<const std::int32_t> penalty_history() const { return std::span(tokens).subspan(prompt_tokens_); }
  int top_logprobs() const { return request_.top_logprobs; }  // -1: none wanted

  // Constrained decoding (GenerateOptions::grammar): prepare_constraint() works out which tokens
  // may come next (on any thread); allowed_tokens() is then that mask, for SampleRow::allowed or
  // mask_logits. A grammar that allows no token fails the sequence.
  bool constrained() const { return constraint_.has_value(); }
  void prepare_constraint();
  std::span<const std::uint64_t> allowed_tokens() const;
  bool failed() const { return failed_; }

  // Takes the next token (with its log-probabilities when wanted), streams its text and reports
  // whether the sequence has finished (end of text, a stop string, its token limit, a complete
  // grammar, or a failure).
  bool advance(std::int32_t token, std::optional<TokenLogprobs> logprobs, const std::vector<std::int32_t>& stop_ids);
  void fail(const std::string& message);

 private:
  void finish(FinishReason reason, std::string tail);

  GenerationRequest request_;
  std::shared_ptr<RequestChannel> channel_;
  std::size_t prompt_tokens_;
  std::size_t max_tokens_;
  std::size_t sampled_ = 0;  // generated tokens plus an end-of-text token, for the usage report
  Sampler sampler_;
  StopMatcher stops_;
  StreamDecoder decoder_;
  std::optional<grammar::TokenConstraint> constraint_;
  std::shared_ptr<const grammar::TokenMask> allowed_;  // prepare_constraint()'s
  bool failed_ = false;
};

}  // namespace rf
