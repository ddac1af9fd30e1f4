#pragma once
// Recognizes a Grammar byte by byte, as llama.cpp's grammar sampler does: the state after some
// bytes is the set of parse stacks still alive, each a list of positions in the grammar's code
// whose top is the next byte set to match. Stacks and states are interned (equal ones share one
// id) and every transition is remembered, so a loop such as the characters of a JSON string
// costs one table lookup per byte once it has been seen.
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace rf::grammar {

class GrammarStacks {
 public:
  using State = std::uint32_t;
  static constexpr State kDead = 0xFFFFFFFF;  // no stack survives: the bytes are not in the language

  explicit GrammarStacks(const Grammar& grammar);  // keeps a reference

  State initial() const { return initial_; }
  State advance(State state, std::uint8_t byte);
  State advance(State state, std::string_view bytes);  // kDead as soon as a byte is refused
  // Whether the grammar may end here (the empty stack is among the state's stacks).
  bool accepts(State state) const;
  // Whether more bytes may follow (some stack is not empty).
  bool continues(State state) const;
  // A key that names the state's stacks by their positions: equal for equal states of any
  // GrammarStacks over the same grammar, whatever their interned ids.
  std::vector<std::uint32_t> canonical(State state) const;

 private:
  struct Node {
    std::uint32_t position;  // of the next element to match; never an End
    std::uint32_t parent;    // the stack below; kEmpty at the bottom
  };
  static constexpr std::uint32_t kEmpty = 0;  // node 0 stands for the empty stack
  static constexpr State kUnknown = 0xFFFFFFFE;

  std::uint32_t push(std::uint32_t parent, std::uint32_t position);
  // Continues the stack past a completed element at `position` (a matched byte or a finished rule).
  std::uint32_t after(std::uint32_t parent, std::uint32_t position);
  // Expands rule references on top until each resulting stack's top is a byte set (or it is empty).
  void expand(std::uint32_t stack, std::vector<std::uint32_t>& out);
  State intern(std::vector<std::uint32_t> stacks);

  const Grammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<std::uint64_t, std::uint32_t> node_ids_;
  std::vector<std::vector<std::uint32_t>> states_;  // sorted, unique stack ids
  std::map<std::vector<std::uint32_t>, State> state_ids_;
  std::vector<State> transitions_;  // state * 256 + byte
  State initial_;
  std::size_t depth_ = 0;  // of expand(), to refuse grammars that nest without end
};

}  // namespace rf::grammar
