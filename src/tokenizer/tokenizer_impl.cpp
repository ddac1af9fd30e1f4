#include "tokenizer/tokenizer_impl.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

namespace {

// Added special tokens that end a turn or a text in the chat formats of common model families.
constexpr std::array<std::string_view, 10> kEndOfGenerationNames = {
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>",
    "<|end|>",    "</s>",       "<end_of_turn>",   "<EOT>",      "<\uFF5Cend\u2581of\u2581sentence\uFF5C>",
};

// transformers' clean_up_tokenization(), applied in the same order.
std::string clean_up_tokenization(std::string text) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRules = {{
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  }};
  for (const auto& [from, to] : kRules) text = Regex::literal(from).replace_all(text, to);
  return text;
}

std::string join(const std::vector<std::string>& pieces, std::string_view separator) {
  std::string text;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) text += separator;
    text += pieces[i];
  }
  return text;
}

}  // namespace

std::optional<TokenId> TokenizerParts::token_to_id(std::string_view token) const {
  for (const AddedToken& added : added_tokens) {
    if (added.content == token) return added.id;
  }
  return model.token_to_id(token);
}

// The added tokens move from parts_ into added_, which answers all questions about them.
TokenizerImpl::TokenizerImpl(TokenizerParts parts)
    : parts_(std::move(parts)), added_(std::move(parts_.added_tokens), parts_.normalizer.get()) {
  const auto check = [this](TokenId id, std::string_view role) {
    if (!id_to_token(id)) fail("the {} id {} is not in the vocabulary", role, id);
  };
  for (const TokenId id : parts_.post_processor.prefix) check(id, "post-processor");
  for (const TokenId id : parts_.post_processor.suffix) check(id, "post-processor");
  if (parts_.bos) check(*parts_.bos, "bos");
  if (parts_.eos) check(*parts_.eos, "eos");
  for (const TokenId id : parts_.end_of_generation) check(id, "end-of-generation");

  eog_ = parts_.end_of_generation;
  if (parts_.eos) eog_.push_back(*parts_.eos);
  for (const std::string_view name : kEndOfGenerationNames) {
    const AddedToken* token = added_.find(name);
    if (token && token->special) eog_.push_back(token->id);
  }
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());

  vocab_size_ = parts_.model.id_count();
  for (const AddedToken& token : added_.tokens()) vocab_size_ = std::max(vocab_size_, static_cast<std::size_t>(token.id) + 1);
}

std::vector<TokenId> TokenizerImpl::encode(std::string_view text, bool add_special) const {
  // The regexes and normalizers need valid UTF-8; repair it as Python's errors="replace" would.
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  std::vector<Fragment> fragments;
  for (TextSegment& segment : added_.split(text, parts_.normalizer.get())) {
    if (segment.added_token) {
      ids.push_back(*segment.added_token);
      continue;
    }
    fragments.assign(1, Fragment{std::move(segment.text), segment.at_text_start});
    if (parts_.pre_tokenizer) parts_.pre_tokenizer->pre_tokenize(fragments);
    for (const Fragment& fragment : fragments) parts_.model.tokenize(fragment.text, ids);
  }
  if (add_special) parts_.post_processor.apply(ids);
  return ids;
}

std::string TokenizerImpl::decode_bytes(const std::vector<TokenId>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const TokenId id : ids) {
    if (skip_special && is_special(id)) continue;
    // Ids without a token (e.g. padding rows of an embedding) are dropped, as Hugging Face does.
    if (const std::string* token = id_to_token(id)) tokens.push_back(*token);
  }
  if (!parts_.decoder) return join(tokens, " ");  // as Hugging Face does without a decoder
  parts_.decoder->decode_chain(tokens);
  return join(tokens, "");
}

std::string TokenizerImpl::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string text = unicode::to_valid_utf8(decode_bytes(ids, skip_special));
  return parts_.clean_up_tokenization_spaces ? clean_up_tokenization(std::move(text)) : text;
}

bool TokenizerImpl::is_special(TokenId id) const {
  const AddedToken* token = added_.find(id);
  return token != nullptr && token->special;
}

std::optional<TokenId> TokenizerImpl::token_to_id(std::string_view token) const {
  if (const AddedToken* added = added_.find(token)) return added->id;
  return parts_.model.token_to_id(token);
}

const std::string* TokenizerImpl::id_to_token(TokenId id) const {
  if (const AddedToken* added = added_.find(id)) return &added->content;
  return parts_.model.id_to_token(id);
}

}  // namespace rf
