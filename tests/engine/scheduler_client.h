#pragma once
// What the scheduler tests (CPU, tests/engine; GPU, tests/backend/gpu) share: greedy requests, the
// reference each prompt gets alone through generate(), and a request's events collected until it ends.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"

namespace rf::serving_test {

// Prompts for the demo model (models/kjv-llama), of different lengths.
inline const std::vector<std::string> kDemoPrompts = {
    "In the beginning",    "And the LORD said unto Moses,", "Blessed are the",  "The kingdom of heaven is like",
    "And it came to pass", "Thou shalt not",                "For God so loved", "Then Jesus answered and said unto them,"};

inline GenerationRequest greedy(std::vector<std::int32_t> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.options.max_tokens = max_tokens;
  r.options.ignore_eos = true;
  r.options.sampling.temperature = 0;
  return r;
}

// The reference: each prompt alone, through the single-sequence generate().
inline std::vector<std::vector<std::int32_t>> alone(ModelRunner& runner,
                                                    const std::vector<std::vector<std::int32_t>>& prompts, int n) {
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& p : prompts) {
    GenerateOptions options;
    options.max_tokens = n;
    options.ignore_eos = true;
    options.sampling.temperature = 0;
    out.push_back(generate(runner, p, options).tokens);
  }
  return out;
}

struct Outcome {
  std::vector<std::int32_t> tokens;
  std::string text;
  bool finished = false;  // ended by a Finished event (not an error, not the deadline)
  std::string error;
  RequestUsage usage;
};

// A request's events until it ends, or 60 s.
inline Outcome collect(RequestChannel& channel) {
  using namespace std::chrono_literals;
  Outcome out;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    for (auto& e : channel.take(100ms)) {
      if (e.kind == StreamEvent::Kind::Text) {
        if (e.token >= 0) out.tokens.push_back(e.token);
        out.text += e.text;
      } else {
        out.finished = e.kind == StreamEvent::Kind::Finished;
        out.error = e.text;
        out.usage = e.usage;
        return out;
      }
    }
  }
  out.error = "timed out";
  return out;
}

}  // namespace rf::serving_test
