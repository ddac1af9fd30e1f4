#pragma once
// GBNF, llama.cpp's grammar notation (what llama-server's `grammar` field takes): rules
// `name ::= alternatives`, starting at `root`; string literals with C-style and \xHH \uHHHH
// \UHHHHHHHH escapes; character classes `[a-z]`, `[^"\\]`; `.` for any character; groups;
// postfix `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` comments.
#include <string_view>

#include "grammar/grammar.h"

namespace rf::grammar {

// Throws rf::Error naming the line and column of the first mistake.
Grammar parse_gbnf(std::string_view text);

}  // namespace rf::grammar
