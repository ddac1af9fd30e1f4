#pragma once
// Whether a grammar's language holds `text`, run through the byte recognizer; what an error says.
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/grammar_stacks.h"
#include "util/error.h"

namespace rf::grammar {

inline bool matches(const Grammar& grammar, std::string_view text) {
  GrammarStacks stacks(grammar);
  const auto state = stacks.advance(stacks.initial(), text);
  return state != GrammarStacks::kDead && stacks.accepts(state);
}

// The message of the rf::Error that `run` throws, or "no error".
template <typename Run>
std::string error_message(Run&& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace rf::grammar
