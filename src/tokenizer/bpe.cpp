#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <queue>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf {

BpeModel::BpeModel(std::vector<std::optional<std::string>> vocab, BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  ids_.reserve(vocab_.size());
  for (std::size_t id = 0; id < vocab_.size(); ++id) {
    if (vocab_[id]) ids_.insert_or_assign(*vocab_[id], static_cast<TokenId>(id));
  }
  if (options_.unk_token) {
    unk_id_ = token_to_id(*options_.unk_token);
    if (!unk_id_) fail("model: unk_token '{}' is not in the vocab", *options_.unk_token);
  }
  for (unsigned byte = 0; byte < 256; ++byte) {
    byte_token_ids_[byte] = token_to_id(fmt::format("<0x{:02X}>", byte)).value_or(-1);
  }
}

void BpeModel::add_merge(std::string_view left, std::string_view right, std::uint32_t rank) {
  const auto id_of = [&](std::string_view token) {
    const auto id = token_to_id(token);
    if (!id) fail("model: the merge of '{}' and '{}' needs '{}', which is not in the vocab", left, right, token);
    return *id;
  };
  // Merging drops the right symbol's continuing_subword_prefix.
  const std::string_view right_body =
      right.starts_with(options_.continuing_subword_prefix) ? right.substr(options_.continuing_subword_prefix.size()) : right;
  const TokenId left_id = id_of(left), right_id = id_of(right);
  add_merge(left_id, right_id, id_of(std::string(left) + std::string(right_body)), rank);
}

std::pair<std::string_view, std::string_view> BpeModel::split_merge(std::string_view merge, std::string_view what) {
  const std::size_t space = merge.find(' ');
  if (space == std::string_view::npos) fail("{} '{}' is not two tokens separated by a space", what, merge);
  return {merge.substr(0, space), merge.substr(space + 1)};
}

void BpeModel::add_merge(std::string_view merge, std::uint32_t rank) {
  const auto [left, right] = split_merge(merge, "model: merge");
  add_merge(left, right, rank);
}

void BpeModel::add_merge(TokenId left, TokenId right, TokenId merged, std::uint32_t rank) {
  merges_.insert_or_assign(pair_key(left, right), MergeResult{rank, merged});
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  const TokenId* id = ids_.find(token);
  if (!id) return std::nullopt;
  return *id;
}

const std::string* BpeModel::id_to_token(TokenId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= vocab_.size() || !vocab_[id]) return nullptr;
  return &*vocab_[id];
}

void BpeModel::tokenize(std::string_view fragment, std::vector<TokenId>& out) const {
  if (fragment.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = token_to_id(fragment)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<TokenId> symbols;
  initial_symbols(fragment, symbols);
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::initial_symbols(std::string_view fragment, std::vector<TokenId>& symbols) const {
  const bool decorate = !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty();
  std::string decorated;
  bool previous_was_unknown = false;
  for (std::size_t pos = 0, length = 0; pos < fragment.size(); pos += length) {
    length = unicode::scan_utf8(fragment, pos).length;
    std::string_view symbol = fragment.substr(pos, length);
    if (decorate) {
      decorated.clear();
      if (pos > 0) decorated += options_.continuing_subword_prefix;
      decorated += symbol;
      if (pos + length == fragment.size()) decorated += options_.end_of_word_suffix;
      symbol = decorated;
    }
    if (const auto id = token_to_id(symbol)) {
      symbols.push_back(*id);
      previous_was_unknown = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all_bytes_known = true;
      for (const char byte : symbol) all_bytes_known = all_bytes_known && byte_token_ids_[static_cast<unsigned char>(byte)] >= 0;
      if (all_bytes_known) {
        for (const char byte : symbol) symbols.push_back(byte_token_ids_[static_cast<unsigned char>(byte)]);
        previous_was_unknown = false;
        continue;
      }
    }
    // Without unk_token, Hugging Face drops the character; so do we.
    if (unk_id_ && !(options_.fuse_unk && previous_was_unknown)) symbols.push_back(*unk_id_);
    previous_was_unknown = true;
  }
}

void BpeModel::merge_symbols(std::vector<TokenId>& symbols) const {
  if (symbols.size() < 2) return;
  // A doubly linked list over `symbols`; a merge folds the right symbol into the left one.
  struct Link {
    int previous, next;
  };
  std::vector<Link> links(symbols.size());
  std::vector<bool> merged_away(symbols.size(), false);
  struct Candidate {
    std::uint32_t rank;
    int position;  // of the left symbol
    TokenId merged;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push_candidate = [&](int position) {
    const MergeResult* merge = merges_.find(pair_key(symbols[position], symbols[links[position].next]));
    if (merge) queue.push({merge->rank, position, merge->merged});
  };

  const int count = static_cast<int>(symbols.size());
  for (int i = 0; i < count; ++i) links[i] = {i - 1, i + 1 < count ? i + 1 : -1};
  for (int i = 0; i + 1 < count; ++i) push_candidate(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int left = top.position;
    const int right = links[left].next;
    if (merged_away[left] || right < 0) continue;
    // Skip entries made stale by an earlier merge of either symbol.
    const MergeResult* merge = merges_.find(pair_key(symbols[left], symbols[right]));
    if (!merge || merge->merged != top.merged) continue;

    symbols[left] = top.merged;
    merged_away[right] = true;
    links[left].next = links[right].next;
    if (links[right].next >= 0) links[links[right].next].previous = left;
    if (links[left].previous >= 0) push_candidate(links[left].previous);
    if (links[left].next >= 0) push_candidate(left);
  }

  std::size_t kept = 0;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    if (!merged_away[i]) symbols[kept++] = symbols[i];
  }
  symbols.resize(kept);
}

}  // namespace rf
