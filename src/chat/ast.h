#pragma once
// The parsed template: statements holding expressions. Every node keeps the offset of the
// source text it came from, so that errors while rendering can name a line and column.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/value.h"

namespace rf::jinja::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Argument {
  std::string name;  // empty for a positional argument
  ExprPtr value;
};

struct FilterCall {
  std::string name;
  std::vector<Argument> args;
  std::size_t offset;
};

struct Literal {
  Value value;
};
struct Name {
  std::string name;
};
struct ListExpr {
  std::vector<ExprPtr> items;
  bool is_tuple;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct GetAttr {
  ExprPtr object;
  std::string name;
};  // object.name
struct GetItem {
  ExprPtr object;
  ExprPtr key;
};  // object[key]
struct Slice {
  ExprPtr object;
  ExprPtr start, stop, step;
};  // absent bounds are null
struct Call {
  ExprPtr callee;
  std::vector<Argument> args;
};
struct Filter {
  ExprPtr operand;
  FilterCall filter;
};
struct Test {
  ExprPtr operand;
  std::string name;
  std::vector<Argument> args;
  bool negated;
};
enum class UnaryOp { Not, Negate, Plus };
struct Unary {
  UnaryOp op;
  ExprPtr operand;
};
enum class BinaryOp { And, Or, Add, Subtract, Multiply, Divide, FloorDivide, Modulo, Power, Concat };
struct Binary {
  BinaryOp op;
  ExprPtr left, right;
};
enum class CompareOp { Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual, In, NotIn };
struct Compare {
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};  // a < b < c
struct Conditional {
  ExprPtr condition, if_true, if_false;
};  // no else: undefined

struct Expr {
  std::size_t offset;
  std::variant<Literal, Name, ListExpr, DictExpr, GetAttr, GetItem, Slice, Call, Filter, Test, Unary, Binary, Compare,
               Conditional>
      node;
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Parameter {
  std::string name;
  ExprPtr default_value;  // may be null
};

// What {% set %} assigns to: names (several unpack a sequence) or a namespace attribute.
struct Target {
  std::vector<std::string> names;
  ExprPtr namespace_object;  // set for `ns.attribute`
  std::string attribute;
};

struct Text {
  std::string text;
};
struct Output {
  ExprPtr expr;
};
struct If {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
};
struct For {
  std::vector<std::string> targets;
  ExprPtr iterable;
  ExprPtr condition;
  Body body;
  Body otherwise;
};
struct Set {
  Target target;
  ExprPtr value;
  Body body;
};  // value null: {% set x %}body{% endset %}
struct Macro {
  std::string name;
  std::vector<Parameter> parameters;
  Body body;
};
struct CallBlock {
  ExprPtr call;
  std::vector<Parameter> caller_parameters;
  Body body;
};
struct FilterBlock {
  std::vector<FilterCall> filters;
  Body body;
};
struct Break {};
struct Continue {};

struct Stmt {
  std::size_t offset;
  std::variant<Text, Output, If, For, Set, Macro, CallBlock, FilterBlock, Break, Continue> node;
};

}  // namespace rf::jinja::ast
