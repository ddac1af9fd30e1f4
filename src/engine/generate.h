#pragma once
// Generation for one sequence: chunked prefill of the prompt, then token-by-token decode with
// the sampler, streaming text as it completes, until EOS, a stop string or the token limit.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "grammar/token_constraint.h"

namespace rf {

class ModelRunner;

struct GenerateOptions {
  int max_tokens = -1;  // -1: until the context is full
  std::vector<std::string> stop;
  bool ignore_eos = false;
  SamplingParams sampling;
  // Constrained decoding: only text within this grammar (null: any). It ends the generation as
  // soon as the grammar is complete.
  std::shared_ptr<const grammar::TokenGrammar> grammar;
  // Special tokens that stay in the text, which otherwise drops them: the markers of tool calls
  // (Mistral's [TOOL_CALLS], Llama 3's <|python_tag|>) that the server parses the calls by.
  std::vector<std::int32_t> shown_special_tokens;
};

enum class FinishReason { Stop, Length };

struct GenerateResult {
  std::vector<std::int32_t> tokens;  // generated ids (a stop token is not included)
  std::string text;
  FinishReason finish = FinishReason::Length;
  std::size_t prompt_tokens = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;  // from the first sampled token to the end
};

GenerateResult generate(ModelRunner& runner, const std::vector<std::int32_t>& prompt, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text = {});

}  // namespace rf
