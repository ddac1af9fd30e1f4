#pragma once
// Fill-in-the-middle: the tokens code models are trained with to write what goes between a prefix
// and a suffix, found by their names in the vocabulary: Qwen's <|fim_prefix|> <|fim_suffix|>
// <|fim_middle|>, StarCoder's <fim_prefix> ..., CodeLlama's <PRE> <SUF> <MID>, DeepSeek-Coder's
// <｜fim▁begin｜> <｜fim▁hole｜> <｜fim▁end｜>. The prompt is in prefix-suffix-middle order, as
// llama.cpp's infill and the models' own examples write it.
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rf {

struct FimTokens {
  TokenId prefix, suffix, middle;
};

// nullopt for a vocabulary without all three of one family's tokens.
std::optional<FimTokens> fim_tokens(const Tokenizer& tokenizer);

// BOS where the tokenizer adds one, <prefix> prefix <suffix> suffix <middle>: the model then
// writes the middle.
std::vector<TokenId> fim_prompt(const Tokenizer& tokenizer, const FimTokens& fim, std::string_view prefix,
                                std::string_view suffix);

}  // namespace rf
