#pragma once
// A context-free grammar over bytes: the form constrained decoding runs (grammar_stacks.h). Rules
// are alternatives of sequences of byte sets and rule references. GBNF text and JSON schemas
// compile to it (gbnf.h, json_schema.h). Characters beyond ASCII are spelled as their UTF-8 byte
// sequences, so a token that ends inside a character is checked as far as it goes.
#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rf::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : std::uint8_t { Bytes, Rule, End };
  Kind kind = Kind::End;
  std::uint32_t index = 0;  // Bytes: Grammar::bytes(index); Rule: the rule
};

// Code points [first, last], inclusive.
struct CodePointRange {
  char32_t first, last;
};

class Grammar {
 public:
  std::uint32_t root() const { return root_; }
  // Each alternative is a run of elements closed by an End; positions index into that code.
  const Element& at(std::uint32_t position) const { return code_[position]; }
  std::span<const std::uint32_t> alternatives(std::uint32_t rule) const { return rules_[rule]; }
  const ByteSet& bytes(std::uint32_t index) const { return byte_sets_[index]; }

 private:
  friend class GrammarBuilder;
  std::vector<Element> code_;
  std::vector<std::vector<std::uint32_t>> rules_;  // each rule's alternatives' start positions
  std::vector<ByteSet> byte_sets_;
  std::uint32_t root_ = 0;
};

using Sequence = std::vector<Element>;

// Assembles a Grammar from rules named in any order; build() checks that every rule used is
// defined and that none is left-recursive (which a top-down recognizer cannot run).
class GrammarBuilder {
 public:
  // The id of the rule of this name, declaring it if new.
  std::uint32_t rule(std::string_view name);
  // A new helper rule, named after `base` (for messages).
  std::uint32_t helper(std::string_view base);
  bool defined(std::uint32_t rule) const;
  // Throws rf::Error if the rule already has alternatives.
  void define(std::uint32_t rule, std::vector<Sequence> alternatives);

  Element bytes(const ByteSet& set);
  Element reference(std::uint32_t rule) const { return {Element::Kind::Rule, rule}; }
  // The UTF-8 bytes of `text`, one element each.
  Sequence literal(std::string_view text);
  // One code point of the ranges (or, negated, any valid code point outside them): a single byte
  // set when every code point is ASCII, else a helper rule over the UTF-8 encodings.
  Element code_points(std::span<const CodePointRange> ranges, bool negated);
  // `item` repeated min to max times (max < 0: unbounded), through helper rules.
  Sequence repeat(const Sequence& item, int min, int max, std::string_view base);

  Grammar build(std::string_view root) &&;

 private:
  std::vector<bool> nullable_rules() const;  // by rule: whether it can match nothing
  void refuse_left_recursion() const;

  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> definitions_;
  std::vector<bool> is_defined_;
  std::unordered_map<std::string, std::uint32_t> by_name_;
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<ByteSet, std::uint32_t> byte_set_index_;
};

// Sorted and merged, within Unicode and without surrogates.
std::vector<CodePointRange> normalized_code_points(std::span<const CodePointRange> ranges);
// The code points (surrogates excluded) outside normalized `ranges`.
std::vector<CodePointRange> complement_code_points(const std::vector<CodePointRange>& ranges);

// The UTF-8 encodings of the code points in `ranges` (surrogates excluded) as sequences of byte
// ranges: each inner vector is one sequence, each pair its bytes' [low, high].
std::vector<std::vector<std::pair<std::uint8_t, std::uint8_t>>> utf8_byte_ranges(std::span<const CodePointRange> ranges);

}  // namespace rf::grammar
