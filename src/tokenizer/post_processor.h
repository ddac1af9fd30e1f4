#pragma once
// Post-processors (tokenizer.json "post_processor") for single sequences: all that matters for
// ids is which special tokens go before and after the sequence.
#include <nlohmann/json_fwd.hpp>

#include <vector>

#include "tokenizer/tokenizer.h"

namespace rf {

struct SpecialTokenTemplate {
  std::vector<TokenId> prefix, suffix;

  void apply(std::vector<TokenId>& ids) const;
};

// TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel (adds nothing), Sequence; null adds nothing.
SpecialTokenTemplate post_processor_from_json(const nlohmann::json& config);

}  // namespace rf
