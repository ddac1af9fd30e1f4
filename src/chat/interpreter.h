#pragma once
// Renders a parsed template: runs its statements, evaluates its expressions, keeps the scopes
// (jinja2's: a loop or macro body has its own, an if does not) and enforces the limits.
#include <string>
#include <string_view>

#include "chat/ast.h"

namespace rf::jinja {

// `body` parsed from `source` (for error positions), with `context` as its variables.
// Throws rf::Error; raise_exception's message comes through unchanged.
std::string render(std::string_view source, const ast::Body& body, const Object& context);

}  // namespace rf::jinja
