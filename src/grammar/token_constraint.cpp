#include "grammar/token_constraint.h"

#include <algorithm>

#include "util/error.h"

namespace rf::grammar {

namespace {
constexpr std::size_t kMostCachedMasks = 4096;  // per grammar; the cache starts over beyond it
}

bool TokenMask::none() const {
  return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
}

VocabTrie::VocabTrie(const std::vector<std::string>& pieces, std::vector<std::int32_t> stop_ids)
    : stop_ids_(std::move(stop_ids)), pieces_(pieces), vocab_size_(pieces.size()) {
  std::vector<std::int32_t> order;
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty() && !is_stop(static_cast<std::int32_t>(id))) order.push_back(static_cast<std::int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return std::tie(pieces[a], a) < std::tie(pieces[b], b); });
  // Tokens order[lo, hi) share their first `depth` bytes; those with exactly `depth` were taken.
  auto build = [&](auto& self, std::size_t lo, std::size_t hi, std::size_t depth) -> void {
    for (std::size_t i = lo; i < hi;) {
      const char byte = pieces[order[i]][depth];
      std::size_t j = i;
      while (j < hi && pieces[order[j]][depth] == byte) ++j;
      const std::size_t node = nodes_.size();
      nodes_.push_back({0, static_cast<std::uint32_t>(tokens_.size()), 0, static_cast<std::uint16_t>(depth + 1),
                        static_cast<std::uint8_t>(byte)});
      std::size_t k = i;
      for (; k < j && pieces[order[k]].size() == depth + 1; ++k) tokens_.push_back(order[k]);
      nodes_[node].token_count = static_cast<std::uint32_t>(k - i);
      max_depth_ = std::max(max_depth_, depth + 1);
      self(self, k, j, depth + 1);
      nodes_[node].subtree_end = static_cast<std::uint32_t>(nodes_.size());
      i = j;
    }
  };
  build(build, 0, order.size(), 0);
}

bool VocabTrie::is_stop(std::int32_t token) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
}

TokenGrammar::TokenGrammar(Grammar grammar, std::shared_ptr<const VocabTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}

std::size_t TokenGrammar::KeyHash::operator()(const std::vector<std::uint32_t>& key) const {
  std::size_t h = key.size();
  for (auto v : key) h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

std::shared_ptr<const TokenMask> TokenGrammar::cached_mask(const std::vector<std::uint32_t>& state) const {
  std::lock_guard lock(mutex_);
  const auto it = masks_.find(state);
  return it == masks_.end() ? nullptr : it->second;
}

void TokenGrammar::cache_mask(std::vector<std::uint32_t> state, std::shared_ptr<const TokenMask> mask) const {
  std::lock_guard lock(mutex_);
  if (masks_.size() >= kMostCachedMasks) masks_.clear();
  masks_.emplace(std::move(state), std::move(mask));
}

TokenConstraint::TokenConstraint(std::shared_ptr<const TokenGrammar> grammar)
    : grammar_(std::move(grammar)), stacks_(grammar_->grammar()), state_(stacks_.initial()) {}

std::shared_ptr<const TokenMask> TokenConstraint::allowed() {
  auto key = stacks_.canonical(state_);
  if (auto mask = grammar_->cached_mask(key)) return mask;
  auto mask = walk();
  if (mask->none()) fail("the grammar allows no token of this model's vocabulary at this point");
  grammar_->cache_mask(std::move(key), mask);
  return mask;
}

std::shared_ptr<const TokenMask> TokenConstraint::walk() {
  const VocabTrie& trie = grammar_->vocabulary();
  auto mask = std::make_shared<TokenMask>(trie.vocab_size());
  path_.assign(trie.max_depth() + 1, state_);
  const auto nodes = trie.nodes();
  const auto tokens = trie.tokens();
  for (std::size_t i = 0; i < nodes.size();) {
    const auto& node = nodes[i];
    const auto next = stacks_.advance(path_[node.depth - 1], node.byte);
    if (next == GrammarStacks::kDead) {
      i = node.subtree_end;
      continue;
    }
    path_[node.depth] = next;
    for (std::uint32_t t = 0; t < node.token_count; ++t) mask->allow(tokens[node.first_token + t]);
    ++i;
  }
  if (stacks_.accepts(state_)) {
    for (auto id : trie.stop_ids()) mask->allow(id);
  }
  return mask;
}

void TokenConstraint::accept(std::int32_t token) {
  const VocabTrie& trie = grammar_->vocabulary();
  if (trie.is_stop(token)) {
    if (!stacks_.accepts(state_)) fail("token {} ends the text where the grammar does not allow it to end", token);
    return;
  }
  const auto next = token >= 0 && static_cast<std::size_t>(token) < trie.vocab_size()
                        ? stacks_.advance(state_, trie.piece(token))
                        : GrammarStacks::kDead;
  if (next == GrammarStacks::kDead || trie.piece(token).empty()) fail("token {} does not fit the grammar here", token);
  state_ = next;
}

bool TokenConstraint::complete() const { return !stacks_.continues(state_); }

}  // namespace rf::grammar
