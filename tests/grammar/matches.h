#pragma once
// Whether a grammar's language holds `text`, run through the byte recognizer.
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/grammar_stacks.h"

namespace rf::grammar {

inline bool matches(const Grammar& grammar, std::string_view text) {
  GrammarStacks stacks(grammar);
  const auto state = stacks.advance(stacks.initial(), text);
  return state != GrammarStacks::kDead && stacks.accepts(state);
}

}  // namespace rf::grammar
