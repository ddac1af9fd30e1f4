#include "chat/predicates.h"

#include <array>

#include "chat/errors.h"
#include "chat/operators.h"
#include "chat/text.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

using Type = Value::Type;
using Predicate = bool (*)(const Value& value, ArgumentReader& args);

std::int64_t integer_of(const Value& value, const char* test) {
  if (value.is(Type::Bool)) return value.as_bool();
  if (!value.is(Type::Int)) fail("the {} test needs an integer, not '{}'", test, value.type_name());
  return value.as_int();
}

template <Type T>
bool is_type(const Value& value, ArgumentReader&) {
  return value.is(T);
}

template <ast::CompareOp Op>
bool compares(const Value& value, ArgumentReader& args) {
  return comparison(Op, value, args.required("other"));
}

// str.islower()/isupper(): unchanged by the case mapping, and with at least one cased letter.
template <bool Lower>
bool has_case(const Value& value, ArgumentReader&) {
  const std::string s = to_str(value), lowered = text::lower(s), raised = text::upper(s);
  return lowered != raised && s == (Lower ? lowered : raised);
}

struct TestEntry {
  std::string_view name;
  Predicate predicate;
};

constexpr std::array<TestEntry, 36> kTests = {{
    {"defined", [](const Value& v, ArgumentReader&) { return !v.is_undefined(); }},
    {"undefined", is_type<Type::Undefined>},
    {"none", is_type<Type::None>},
    {"boolean", is_type<Type::Bool>},
    {"true", [](const Value& v, ArgumentReader&) { return v.is(Type::Bool) && v.as_bool(); }},
    {"false", [](const Value& v, ArgumentReader&) { return v.is(Type::Bool) && !v.as_bool(); }},
    {"integer", is_type<Type::Int>},
    {"float", is_type<Type::Float>},
    {"number", [](const Value& v, ArgumentReader&) { return v.is_numeric(); }},
    {"string", is_type<Type::String>},
    {"mapping", is_type<Type::Dict>},
    // jinja2's Undefined is iterable (as empty), so `undefined is iterable` holds there too.
    {"iterable",
     [](const Value& v, ArgumentReader&) {
       return v.is(Type::String) || v.is(Type::List) || v.is(Type::Dict) || v.is_undefined();
     }},
    {"sequence",
     [](const Value& v, ArgumentReader&) { return v.is(Type::String) || v.is(Type::List) || v.is(Type::Dict); }},
    {"callable", is_type<Type::Function>},
    {"odd", [](const Value& v, ArgumentReader&) { return integer_of(v, "odd") % 2 != 0; }},
    {"even", [](const Value& v, ArgumentReader&) { return integer_of(v, "even") % 2 == 0; }},
    {"divisibleby",
     [](const Value& v, ArgumentReader& args) {
       const std::int64_t divisor = integer_of(args.required("num"), "divisibleby");
       if (divisor == 0) fail("integer division or modulo by zero");
       return divisor == -1 || integer_of(v, "divisibleby") % divisor == 0;
     }},
    {"eq", compares<ast::CompareOp::Equal>},
    {"equalto", compares<ast::CompareOp::Equal>},
    {"==", compares<ast::CompareOp::Equal>},
    {"ne", compares<ast::CompareOp::NotEqual>},
    {"!=", compares<ast::CompareOp::NotEqual>},
    {"lt", compares<ast::CompareOp::Less>},
    {"lessthan", compares<ast::CompareOp::Less>},
    {"<", compares<ast::CompareOp::Less>},
    {"le", compares<ast::CompareOp::LessEqual>},
    {"<=", compares<ast::CompareOp::LessEqual>},
    {"gt", compares<ast::CompareOp::Greater>},
    {"greaterthan", compares<ast::CompareOp::Greater>},
    {">", compares<ast::CompareOp::Greater>},
    {"ge", compares<ast::CompareOp::GreaterEqual>},
    {">=", compares<ast::CompareOp::GreaterEqual>},
    {"in", [](const Value& v, ArgumentReader& args) { return contains(args.required("seq"), v); }},
    {"sameas", [](const Value& v, ArgumentReader& args) { return v.same_as(args.required("other")); }},
    {"lower", has_case<true>},
    {"upper", has_case<false>},
}};

const TestEntry* find_test(std::string_view name) {
  for (const TestEntry& entry : kTests) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace

bool has_test(std::string_view name) { return find_test(name) != nullptr; }

bool apply_test(std::string_view name, const Value& value, ArgumentReader& args) {
  const TestEntry* entry = find_test(name);
  if (!entry) fail("no test named '{}'", name);
  const bool result = entry->predicate(value, args);
  args.finish();
  return result;
}

}  // namespace rf::jinja
