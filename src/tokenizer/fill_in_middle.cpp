#include "tokenizer/fill_in_middle.h"

namespace rf {

std::optional<FimTokens> fim_tokens(const Tokenizer& tokenizer) {
  static const std::string_view kFamilies[][3] = {
      {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},  // Qwen 2.5 Coder, Qwen 3
      {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},        // StarCoder
      {"▁<PRE>", "▁<SUF>", "▁<MID>"},                          // CodeLlama (SentencePiece)
      {"<PRE>", "<SUF>", "<MID>"},                             // CodeLlama (other conversions)
      {"<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"},  // DeepSeek-Coder
  };
  for (const auto& names : kFamilies) {
    const auto prefix = tokenizer.token_to_id(names[0]), suffix = tokenizer.token_to_id(names[1]),
               middle = tokenizer.token_to_id(names[2]);
    if (prefix && suffix && middle) return FimTokens{*prefix, *suffix, *middle};
  }
  return std::nullopt;
}

std::vector<TokenId> fim_prompt(const Tokenizer& tokenizer, const FimTokens& fim, std::string_view prefix,
                                std::string_view suffix) {
  std::vector<TokenId> ids;
  const auto bos = tokenizer.bos_id();
  const auto opened = tokenizer.encode("", true);
  if (bos && !opened.empty() && opened.front() == *bos) ids.push_back(*bos);
  ids.push_back(fim.prefix);
  for (const TokenId id : tokenizer.encode(prefix, false)) ids.push_back(id);
  ids.push_back(fim.suffix);
  for (const TokenId id : tokenizer.encode(suffix, false)) ids.push_back(id);
  ids.push_back(fim.middle);
  return ids;
}

}  // namespace rf
