#pragma once
// A generation request as the scheduler takes it, and the channel through which its text streams
// back to the thread that submitted it while the engine thread produces it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/event_channel.h"
#include "engine/generate.h"

namespace rf {

struct GenerationRequest {
  std::vector<std::int32_t> prompt;
  GenerateOptions options;  // max_tokens -1: until the context is full
  int top_logprobs = -1;    // -1: no log-probabilities; else the chosen token's and this many alternatives
};

struct TokenLogprob {
  std::int32_t token = -1;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // most likely first
};

struct RequestUsage {
  std::size_t prompt_tokens = 0;
  std::size_t completion_tokens = 0;
  std::size_t cached_prompt_tokens = 0;  // prompt tokens whose KV came from the prefix cache
};

struct StreamEvent {
  enum class Kind { Text, Finished, Failed };
  Kind kind = Kind::Text;
  std::string text;         // Text: newly released text, maybe empty; Failed: what went wrong
  std::int32_t token = -1;  // Text: the token it came with; -1 for text held back until the end
  std::optional<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::Length;  // Finished
  RequestUsage usage;                         // Finished
};

using RequestChannel = EventChannel<StreamEvent>;

}  // namespace rf
