#pragma once
// Constrained decoding: which tokens may come next so that the text stays within a grammar.
// The tokens' bytes are kept in a trie, walked depth-first alongside the grammar's states: a
// subtree is skipped as soon as its prefix leaves the grammar, so a narrow state (after "{" in
// JSON) visits a handful of nodes and a wide one (inside a string) the whole vocabulary once.
// Masks are cached by grammar state and shared by every sequence of the same TokenGrammar.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_stacks.h"

namespace rf::grammar {

// One bit per token id: set where the token is allowed.
class TokenMask {
 public:
  explicit TokenMask(std::size_t tokens) : words_((tokens + 63) / 64), tokens_(tokens) {}
  void allow(std::int32_t token) { words_[token / 64] |= std::uint64_t{1} << (token % 64); }
  bool allows(std::int32_t token) const { return (words_[token / 64] >> (token % 64)) & 1; }
  bool none() const;
  std::size_t tokens() const { return tokens_; }
  std::span<const std::uint64_t> words() const { return words_; }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t tokens_;
};

// The tokens' bytes in a trie laid out depth-first, so a walk is a loop with skips.
class VocabTrie {
 public:
  // pieces[id]: the bytes token id adds to the text (empty: never allowed, e.g. control
  // tokens); stop_ids: the tokens that end generation, allowed where the grammar may end.
  VocabTrie(const std::vector<std::string>& pieces, std::vector<std::int32_t> stop_ids);

  struct Node {
    std::uint32_t subtree_end;  // one past the last node below this one
    std::uint32_t first_token;  // tokens ending here: tokens()[first_token, first_token + token_count)
    std::uint32_t token_count;
    std::uint16_t depth;        // 1 for a first byte
    std::uint8_t byte;
  };
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const std::int32_t> tokens() const { return tokens_; }
  std::span<const std::int32_t> stop_ids() const { return stop_ids_; }
  std::size_t vocab_size() const { return vocab_size_; }
  std::size_t max_depth() const { return max_depth_; }
  const std::string& piece(std::int32_t token) const { return pieces_.at(token); }
  bool is_stop(std::int32_t token) const;

 private:
  std::vector<Node> nodes_;
  std::vector<std::int32_t> tokens_;
  std::vector<std::int32_t> stop_ids_;
  std::vector<std::string> pieces_;
  std::size_t vocab_size_;
  std::size_t max_depth_ = 0;
};

// A grammar bound to a vocabulary, shared by the sequences that use it.
class TokenGrammar {
 public:
  TokenGrammar(Grammar grammar, std::shared_ptr<const VocabTrie> vocabulary);
  const Grammar& grammar() const { return grammar_; }
  const VocabTrie& vocabulary() const { return *vocabulary_; }

  std::shared_ptr<const TokenMask> cached_mask(const std::vector<std::uint32_t>& state) const;
  void cache_mask(std::vector<std::uint32_t> state, std::shared_ptr<const TokenMask> mask) const;

 private:
  struct KeyHash {
    std::size_t operator()(const std::vector<std::uint32_t>& key) const;
  };
  Grammar grammar_;
  std::shared_ptr<const VocabTrie> vocabulary_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::vector<std::uint32_t>, std::shared_ptr<const TokenMask>, KeyHash> masks_;
};

// One sequence's way through a TokenGrammar.
class TokenConstraint {
 public:
  explicit TokenConstraint(std::shared_ptr<const TokenGrammar> grammar);

  // The tokens that keep the text within the grammar; stop tokens where it may end. Throws
  // rf::Error when no token of the vocabulary fits.
  std::shared_ptr<const TokenMask> allowed();
  // Moves past a token; throws rf::Error for one allowed() excludes.
  void accept(std::int32_t token);
  // The grammar is complete: only a stop token may follow.
  bool complete() const;

 private:
  std::shared_ptr<const TokenMask> walk();

  std::shared_ptr<const TokenGrammar> grammar_;
  GrammarStacks stacks_;
  GrammarStacks::State state_;
  std::vector<GrammarStacks::State> path_;  // walk()'s state at each depth
};

}  // namespace rf::grammar
