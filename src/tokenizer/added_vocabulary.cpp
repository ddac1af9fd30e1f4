#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/normalizers.h"
#include "tokenizer/unicode.h"

namespace rf {

namespace {

std::size_t whitespace_run_before(std::string_view text, std::size_t end) {
  std::size_t begin = end, length = 0;
  while (begin > 0 && unicode::is_whitespace(unicode::decode_utf8_before(text, begin, length))) begin -= length;
  return end - begin;
}

std::size_t whitespace_run_after(std::string_view text, std::size_t begin) {
  std::size_t end = begin, length = 0;
  while (end < text.size() && unicode::is_whitespace(unicode::decode_utf8(text, end, length))) end += length;
  return end - begin;
}

// single_word: no word character right before or after the match.
bool stands_alone(std::string_view text, std::size_t begin, std::size_t end) {
  std::size_t length = 0;
  const bool word_before = begin > 0 && unicode::is_word_character(unicode::decode_utf8_before(text, begin, length));
  const bool word_after = end < text.size() && unicode::is_word_character(unicode::decode_utf8(text, end, length));
  return !word_before && !word_after;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, std::size_t token_index) {
  std::size_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    const auto it = nodes_[node].children.find(byte);
    if (it != nodes_[node].children.end()) {
      node = it->second;
    } else {
      nodes_[node].children.emplace(byte, nodes_.size());
      node = nodes_.size();
      nodes_.emplace_back();
    }
  }
  nodes_[node].token_index = token_index;
}

std::optional<AddedVocabulary::Matcher::Match> AddedVocabulary::Matcher::find(std::string_view text, std::size_t from) const {
  for (std::size_t begin = from; begin < text.size(); ++begin) {
    std::optional<Match> longest;
    std::size_t node = 0;
    for (std::size_t pos = begin; pos < text.size(); ++pos) {
      const auto it = nodes_[node].children.find(static_cast<unsigned char>(text[pos]));
      if (it == nodes_[node].children.end()) break;
      node = it->second;
      if (nodes_[node].token_index) longest = Match{begin, pos + 1, *nodes_[node].token_index};
    }
    if (longest) return longest;
  }
  return std::nullopt;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer) : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    index_of_id_.insert_or_assign(token.id, i);
    index_of_content_.insert_or_assign(token.content, i);
    if (token.content.empty()) continue;
    if (!token.normalized) {
      raw_matcher_.add(token.content, i);
      continue;
    }
    std::string pattern = token.content;
    if (normalizer) normalizer->normalize(pattern);
    if (!pattern.empty()) normalized_matcher_.add(pattern, i);
  }
}

const AddedToken* AddedVocabulary::find(TokenId id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  const auto it = index_of_content_.find(std::string(content));
  return it == index_of_content_.end() ? nullptr : &tokens_[it->second];
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, const Normalizer* normalizer) const {
  std::vector<TextSegment> raw_split;
  split_segment({std::string(text), std::nullopt, true}, raw_matcher_, raw_split);
  std::vector<TextSegment> segments;
  segments.reserve(raw_split.size());
  for (TextSegment& segment : raw_split) {
    if (segment.added_token) {
      segments.push_back(std::move(segment));
      continue;
    }
    if (normalizer) normalizer->normalize(segment.text);
    split_segment(std::move(segment), normalized_matcher_, segments);
  }
  return segments;
}

void AddedVocabulary::split_segment(TextSegment segment, const Matcher& matcher, std::vector<TextSegment>& out) const {
  const std::string& text = segment.text;
  if (text.empty()) return;
  if (matcher.empty()) {
    out.push_back(std::move(segment));
    return;
  }
  const auto emit_text = [&](std::size_t begin, std::size_t end) {
    out.push_back({text.substr(begin, end - begin), std::nullopt, segment.at_text_start && begin == 0});
  };
  std::size_t emitted = 0;
  for (auto match = matcher.find(text, 0); match; match = matcher.find(text, match->end)) {
    const AddedToken& token = tokens_[match->token_index];
    std::size_t begin = match->begin, end = match->end;
    if (begin < emitted) continue;  // inside whitespace that the previous token's rstrip took
    if (token.single_word && !stands_alone(text, begin, end)) continue;
    if (token.lstrip) begin = std::max(begin - whitespace_run_before(text, begin), emitted);
    if (token.rstrip) end += whitespace_run_after(text, end);
    if (begin > emitted) emit_text(emitted, begin);
    out.push_back({std::string(), token.id, false});
    emitted = end;
  }
  if (emitted < text.size()) emit_text(emitted, text.size());
}

}  // namespace rf
