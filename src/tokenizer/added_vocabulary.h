#pragma once
// Added tokens (tokenizer.json "added_tokens", GGUF control and user-defined tokens): found in
// the text before normalization and pre-tokenization, leftmost and then longest match first.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rf {

class Normalizer;

struct AddedToken {
  TokenId id;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match swallows whitespace before it
  bool rstrip = false;       // ... and after it
  bool single_word = false;  // matches only where no word character touches it
  bool normalized = false;   // matched in normalized rather than raw text
};

// A stretch of the text being encoded: an added token or text for the model.
struct TextSegment {
  std::string text;
  std::optional<TokenId> added_token;
  bool at_text_start;
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) is applied to the content of the tokens marked normalized.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits the raw text at the added tokens, then normalizes the stretches between them and
  // splits those at the normalized tokens, as Hugging Face's AddedVocabulary::extract_and_normalize.
  std::vector<TextSegment> split(std::string_view text, const Normalizer* normalizer) const;

  const AddedToken* find(TokenId id) const;
  const AddedToken* find(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of the patterns of one pass, for leftmost-longest matching.
  class Matcher {
   public:
    void add(std::string_view pattern, std::size_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    struct Match {
      std::size_t begin, end, token_index;
    };
    std::optional<Match> find(std::string_view text, std::size_t from) const;

   private:
    struct Node {
      std::unordered_map<unsigned char, std::size_t> children;
      std::optional<std::size_t> token_index;
    };
    std::vector<Node> nodes_{1};
  };
  // Appends `segment` to `out`, cut at the matches of `matcher`.
  void split_segment(TextSegment segment, const Matcher& matcher, std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<TokenId, std::size_t> index_of_id_;
  std::unordered_map<std::string, std::size_t> index_of_content_;
  Matcher raw_matcher_, normalized_matcher_;
};

}  // namespace rf
