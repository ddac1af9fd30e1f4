#pragma once
// The pipeline that both loaders (tokenizer.json, GGUF) assemble: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor template and decoder, as in Hugging Face's tokenizers.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace rf {

// What a loader reads from its source. Null stages are skipped.
struct TokenizerParts {
  explicit TokenizerParts(BpeModel bpe) : model(std::move(bpe)) {}

  BpeModel model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Decoder> decoder;  // null: tokens joined with spaces, as Hugging Face does
  SpecialTokenTemplate post_processor;
  std::vector<AddedToken> added_tokens;
  std::optional<TokenId> bos, eos;
  std::vector<TokenId> end_of_generation;  // besides eos and the added tokens named like end-of-turn tokens
  bool clean_up_tokenization_spaces = false;  // transformers' removal of the space in " ." and the like

  // An added token's id, else the model's (as Hugging Face looks tokens up).
  std::optional<TokenId> token_to_id(std::string_view token) const;
};

class TokenizerImpl {
 public:
  explicit TokenizerImpl(TokenizerParts parts);  // throws if an id the parts name has no token

  std::vector<TokenId> encode(std::string_view text, bool add_special) const;
  // The decoder's output, which may hold ill-formed UTF-8 (e.g. a character cut in two).
  std::string decode_bytes(const std::vector<TokenId>& ids, bool skip_special) const;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special) const;

  std::size_t vocab_size() const { return vocab_size_; }  // one past the highest id
  std::optional<TokenId> bos_id() const { return parts_.bos; }
  std::optional<TokenId> eos_id() const { return parts_.eos; }
  const std::vector<TokenId>& eog_ids() const { return eog_; }
  bool is_special(TokenId id) const;
  std::optional<TokenId> token_to_id(std::string_view token) const;
  const std::string* id_to_token(TokenId id) const;  // null for an unknown id

 private:
  TokenizerParts parts_;
  AddedVocabulary added_;
  std::vector<TokenId> eog_;
  std::size_t vocab_size_ = 0;
};

}  // namespace rf
