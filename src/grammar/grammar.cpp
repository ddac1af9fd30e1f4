#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace rf::grammar {

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

using ByteRanges = std::vector<std::pair<std::uint8_t, std::uint8_t>>;

int utf8_length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

std::string encode(char32_t c) {
  std::string bytes;
  unicode::append_utf8(bytes, c);
  return bytes;
}

// Splits [first, last] (code points of one encoded length) until every byte of the encodings
// ranges independently of the others: then one sequence of byte ranges covers it exactly.
void split_same_length(char32_t first, char32_t last, std::vector<ByteRanges>& out) {
  for (int i = 1; i < utf8_length(first); ++i) {
    const char32_t low_bits = (char32_t{1} << (6 * i)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      split_same_length(first, first | low_bits, out);
      split_same_length((first | low_bits) + 1, last, out);
      return;
    }
    if ((last & low_bits) != low_bits) {
      split_same_length(first, (last & ~low_bits) - 1, out);
      split_same_length(last & ~low_bits, last, out);
      return;
    }
  }
  const auto a = encode(first), b = encode(last);
  ByteRanges sequence;
  for (std::size_t k = 0; k < a.size(); ++k) sequence.emplace_back(static_cast<std::uint8_t>(a[k]), static_cast<std::uint8_t>(b[k]));
  out.push_back(std::move(sequence));
}

}  // namespace

std::vector<CodePointRange> normalized_code_points(std::span<const CodePointRange> ranges) {
  std::vector<CodePointRange> sorted;
  for (auto r : ranges) {
    if (r.first > r.last || r.first > kMaxCodePoint) continue;
    r.last = std::min(r.last, kMaxCodePoint);
    if (r.first < kSurrogateFirst && r.last > kSurrogateLast) {
      sorted.push_back({r.first, kSurrogateFirst - 1});
      sorted.push_back({kSurrogateLast + 1, r.last});
    } else if (r.last < kSurrogateFirst || r.first > kSurrogateLast) {
      sorted.push_back(r);
    } else {
      if (r.first < kSurrogateFirst) sorted.push_back({r.first, kSurrogateFirst - 1});
      if (r.last > kSurrogateLast) sorted.push_back({kSurrogateLast + 1, r.last});
    }
  }
  std::sort(sorted.begin(), sorted.end(), [](auto a, auto b) { return a.first < b.first; });
  std::vector<CodePointRange> merged;
  for (auto r : sorted) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

std::vector<CodePointRange> complement_code_points(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  char32_t next = 0;
  for (auto r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.last + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalized_code_points(out);
}


std::vector<ByteRanges> utf8_byte_ranges(std::span<const CodePointRange> ranges) {
  std::vector<ByteRanges> out;
  for (auto r : normalized_code_points(ranges)) {
    for (char32_t limit : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}, kMaxCodePoint}) {
      if (r.first > limit) continue;
      split_same_length(r.first, std::min(r.last, limit), out);
      if (r.last <= limit) break;
      r.first = limit + 1;
    }
  }
  return out;
}

std::uint32_t GrammarBuilder::rule(std::string_view name) {
  if (const auto it = by_name_.find(std::string(name)); it != by_name_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  definitions_.emplace_back();
  is_defined_.push_back(false);
  by_name_.emplace(std::string(name), id);
  return id;
}

std::uint32_t GrammarBuilder::helper(std::string_view base) {
  for (std::size_t n = names_.size();; ++n) {
    const std::string name = std::string(base) + "-" + std::to_string(n);
    if (!by_name_.contains(name)) return rule(name);
  }
}

bool GrammarBuilder::defined(std::uint32_t rule) const { return is_defined_.at(rule); }

void GrammarBuilder::define(std::uint32_t rule, std::vector<Sequence> alternatives) {
  if (is_defined_.at(rule)) fail("grammar rule '{}' is defined twice", names_[rule]);
  is_defined_[rule] = true;
  definitions_[rule] = std::move(alternatives);
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  auto [it, added] = byte_set_index_.emplace(set, static_cast<std::uint32_t>(byte_sets_.size()));
  if (added) byte_sets_.push_back(set);
  return {Element::Kind::Bytes, it->second};
}

Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence sequence;
  for (unsigned char c : text) {
    ByteSet set;
    set.set(c);
    sequence.push_back(bytes(set));
  }
  return sequence;
}

Element GrammarBuilder::code_points(std::span<const CodePointRange> ranges, bool negated) {
  auto set = normalized_code_points(ranges);
  if (negated) set = complement_code_points(set);
  if (set.empty()) fail("a character class in the grammar matches no character");
  ByteSet ascii;
  std::vector<Sequence> alternatives;
  for (const auto& sequence : utf8_byte_ranges(set)) {
    if (sequence.size() == 1) {
      for (int b = sequence[0].first; b <= sequence[0].second; ++b) ascii.set(b);
      continue;
    }
    Sequence encoded;
    for (auto [low, high] : sequence) {
      ByteSet byte_range;
      for (int b = low; b <= high; ++b) byte_range.set(b);
      encoded.push_back(bytes(byte_range));
    }
    alternatives.push_back(std::move(encoded));
  }
  if (alternatives.empty()) return bytes(ascii);
  if (ascii.any()) alternatives.insert(alternatives.begin(), Sequence{bytes(ascii)});
  const auto id = helper("char");
  define(id, std::move(alternatives));
  return reference(id);
}

Sequence GrammarBuilder::repeat(const Sequence& item, int min, int max, std::string_view base) {
  if (max >= 0 && max < min) fail("a repetition in the grammar has its maximum {} below its minimum {}", max, min);
  Sequence result;
  if (item.empty()) return result;
  for (int i = 0; i < min; ++i) result.insert(result.end(), item.begin(), item.end());
  if (max < 0) {  // many ::= item many | (nothing)
    const auto many = helper(base);
    Sequence again = item;
    again.push_back(reference(many));
    define(many, {std::move(again), {}});
    result.push_back(reference(many));
    return result;
  }
  // optional_k ::= item optional_(k-1) | (nothing)
  std::optional<std::uint32_t> previous;
  for (int k = min; k < max; ++k) {
    const auto optional = helper(base);
    Sequence once = item;
    if (previous) once.push_back(reference(*previous));
    define(optional, {std::move(once), {}});
    previous = optional;
  }
  if (previous) result.push_back(reference(*previous));
  return result;
}

std::vector<bool> GrammarBuilder::nullable_rules() const {
  std::vector<bool> nullable(names_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint32_t r = 0; r < names_.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alternative : definitions_[r]) {
        const bool empty = std::all_of(alternative.begin(), alternative.end(), [&](const Element& e) {
          return e.kind == Element::Kind::Rule && nullable[e.index];
        });
        if (empty) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// A rule that can reach itself without consuming a byte would expand forever.
void GrammarBuilder::refuse_left_recursion() const {
  const std::vector<bool> nullable = nullable_rules();
  std::vector<std::vector<std::uint32_t>> leftmost(names_.size());
  for (std::uint32_t r = 0; r < names_.size(); ++r) {
    for (const auto& alternative : definitions_[r]) {
      for (const Element& e : alternative) {
        if (e.kind != Element::Kind::Rule) break;
        leftmost[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  enum class Mark : std::uint8_t { New, Open, Done };
  std::vector<Mark> marks(names_.size(), Mark::New);
  std::function<void(std::uint32_t)> visit = [&](std::uint32_t r) {
    marks[r] = Mark::Open;
    for (auto next : leftmost[r]) {
      if (marks[next] == Mark::Open) fail("grammar rule '{}' is left-recursive, which is not supported", names_[next]);
      if (marks[next] == Mark::New) visit(next);
    }
    marks[r] = Mark::Done;
  };
  for (std::uint32_t r = 0; r < names_.size(); ++r) {
    if (marks[r] == Mark::New) visit(r);
  }
}

Grammar GrammarBuilder::build(std::string_view root) && {
  const auto found = by_name_.find(std::string(root));
  if (found == by_name_.end() || !is_defined_[found->second]) fail("the grammar has no '{}' rule", root);
  for (std::uint32_t r = 0; r < names_.size(); ++r) {
    if (!is_defined_[r]) fail("grammar rule '{}' is used but never defined", names_[r]);
  }
  refuse_left_recursion();
  Grammar grammar;
  grammar.root_ = found->second;
  for (std::uint32_t r = 0; r < names_.size(); ++r) {
    auto& starts = grammar.rules_.emplace_back();
    for (const auto& alternative : definitions_[r]) {
      starts.push_back(static_cast<std::uint32_t>(grammar.code_.size()));
      grammar.code_.insert(grammar.code_.end(), alternative.begin(), alternative.end());
      grammar.code_.push_back({Element::Kind::End, 0});
    }
  }
  grammar.byte_sets_ = std::move(byte_sets_);
  return grammar;
}

}  // namespace rf::grammar
