#pragma once
// The BPE model: a fragment starts as one symbol per character and adjacent symbols are merged,
// lowest merge rank first (leftmost among equal ranks), as Hugging Face's tokenizers does.
// Byte-level vocabularies (GPT-2, Llama 3, Qwen) and SentencePiece ones with byte fallback
// (Llama 2, Mistral) both run through it; GGUF's SentencePiece scores become merge ranks.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/flat_hash_map.h"
#include "tokenizer/tokenizer.h"

namespace rf {

struct BpeOptions {
  std::optional<std::string> unk_token{};  // stands for characters the vocabulary lacks
  bool fuse_unk = false;                   // one unk_token for a run of unknown characters
  bool byte_fallback = false;              // unknown characters become <0xNN> byte tokens
  bool ignore_merges = false;              // a fragment that is a token is emitted whole
  std::string continuing_subword_prefix{};  // prepended to every symbol but a fragment's first
  std::string end_of_word_suffix{};         // appended to a fragment's last symbol
};

class BpeModel {
 public:
  // `vocab` holds the token of every id (nullopt for ids it skips).
  BpeModel(std::vector<std::optional<std::string>> vocab, BpeOptions options);
  // Moving keeps the tokens where ids_ sees them; a copy would not.
  BpeModel(BpeModel&&) noexcept = default;
  BpeModel& operator=(BpeModel&&) noexcept = default;

  // Lower ranks merge first. Adding a pair again replaces its merge (as in Hugging Face, where
  // the later line of a merges list wins).
  void add_merge(std::string_view left, std::string_view right, std::uint32_t rank);  // throws naming a token not in the vocab
  void add_merge(std::string_view merge, std::uint32_t rank);  // "left right", as merges lists write it
  // The two tokens of a "left right" merge line; throws "<what> '<merge>' is not two tokens ..." for
  // a line without a space.
  static std::pair<std::string_view, std::string_view> split_merge(std::string_view merge, std::string_view what);
  void add_merge(TokenId left, TokenId right, TokenId merged, std::uint32_t rank);
  void reserve_merges(std::size_t count) { merges_.reserve(count); }

  void tokenize(std::string_view fragment, std::vector<TokenId>& out) const;

  std::size_t id_count() const { return vocab_.size(); }  // one past the highest id
  std::optional<TokenId> token_to_id(std::string_view token) const;
  const std::string* id_to_token(TokenId id) const;  // null for an id without a token

 private:
  struct MergeResult {
    std::uint32_t rank = 0;
    TokenId merged = 0;
  };
  static std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  // The symbols a fragment starts with: its characters, or their byte tokens, or unk_token.
  void initial_symbols(std::string_view fragment, std::vector<TokenId>& symbols) const;
  void merge_symbols(std::vector<TokenId>& symbols) const;

  std::vector<std::optional<std::string>> vocab_;
  FlatHashMap<std::string_view, TokenId, std::hash<std::string_view>> ids_;  // views into vocab_
  FlatHashMap<std::uint64_t, MergeResult, std::hash<std::uint64_t>> merges_;
  BpeOptions options_;
  std::optional<TokenId> unk_id_;
  std::array<TokenId, 256> byte_token_ids_;  // the ids of <0x00>..<0xFF>, -1 where the vocab lacks one
};

}  // namespace rf
