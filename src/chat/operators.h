#pragma once
// Python's operators on template values: arithmetic, `~`, comparisons and `in`.
#include "chat/ast.h"

namespace rf::jinja {

Value unary_operation(ast::UnaryOp op, const Value& operand);  // not, -, +
// Every binary operator but `and`/`or`, which the interpreter short-circuits.
Value binary_operation(ast::BinaryOp op, const Value& left, const Value& right);
bool comparison(ast::CompareOp op, const Value& left, const Value& right);
bool contains(const Value& container, const Value& item);  // Python's `item in container`

}  // namespace rf::jinja
