#pragma once
// Parses a template into its syntax tree, with jinja2's grammar and operator precedence.
#include <string_view>

#include "chat/ast.h"

namespace rf::jinja {

// `source` as normalize_source() returns it; it must outlive nothing (literals are copied).
// Throws rf::Error naming the line and column of the first syntax error.
ast::Body parse(std::string_view source);

}  // namespace rf::jinja
