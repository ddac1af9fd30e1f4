#include "chat/operators.h"

#include <algorithm>
#include <cmath>

#include "chat/errors.h"
#include "chat/limits.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

using ast::BinaryOp;
using ast::CompareOp;
using ast::UnaryOp;

const char* symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Subtract:
      return "-";
    case BinaryOp::Multiply:
      return "*";
    case BinaryOp::Divide:
      return "/";
    case BinaryOp::FloorDivide:
      return "//";
    case BinaryOp::Modulo:
      return "%";
    case BinaryOp::Power:
      return "**";
    case BinaryOp::Concat:
      return "~";
    case BinaryOp::And:
      return "and";
    case BinaryOp::Or:
      return "or";
  }
  return "?";
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", symbol(op), a.type_name(), b.type_name());
}

bool is_integral(const Value& v) { return v.is(Value::Type::Int) || v.is(Value::Type::Bool); }
std::int64_t integral(const Value& v) { return v.is(Value::Type::Bool) ? v.as_bool() : v.as_int(); }

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) fail("integer overflow");
  return result;
}

std::int64_t checked_subtract(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_sub_overflow(a, b, &result)) fail("integer overflow");
  return result;
}

std::int64_t checked_multiply(std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) fail("integer overflow");
  return result;
}

std::int64_t int_power(std::int64_t base, std::int64_t exponent) {
  std::int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = checked_multiply(result, base);
    exponent >>= 1;
    if (exponent > 0) base = checked_multiply(base, base);
  }
  return result;
}

Value int_arithmetic(BinaryOp op, std::int64_t a, std::int64_t b) {
  switch (op) {
    case BinaryOp::Add:
      return Value::integer(checked_add(a, b));
    case BinaryOp::Subtract:
      return Value::integer(checked_subtract(a, b));
    case BinaryOp::Multiply:
      return Value::integer(checked_multiply(a, b));
    case BinaryOp::FloorDivide:
    case BinaryOp::Modulo: {
      if (b == 0) fail("integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) {
        if (op == BinaryOp::Modulo) return Value::integer(0);
        fail("integer overflow");
      }
      std::int64_t quotient = a / b, remainder = a % b;
      if (remainder != 0 && (remainder < 0) != (b < 0)) {  // Python rounds toward negative infinity
        --quotient;
        remainder += b;
      }
      return Value::integer(op == BinaryOp::FloorDivide ? quotient : remainder);
    }
    case BinaryOp::Power:
      if (b < 0) {
        if (a == 0) fail("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
      }
      return Value::integer(int_power(a, b));
    default:
      fail("integer arithmetic for {}", symbol(op));
  }
}

Value float_arithmetic(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add:
      return Value::number(a + b);
    case BinaryOp::Subtract:
      return Value::number(a - b);
    case BinaryOp::Multiply:
      return Value::number(a * b);
    case BinaryOp::FloorDivide:
    case BinaryOp::Modulo: {
      if (b == 0) fail("float divmod()");
      double remainder = std::fmod(a, b);
      if (remainder != 0 && (remainder < 0) != (b < 0)) remainder += b;
      return Value::number(op == BinaryOp::Modulo ? remainder : std::floor(a / b));
    }
    case BinaryOp::Power: {
      if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
      const double result = std::pow(a, b);
      if (std::isnan(result) && !std::isnan(a) && !std::isnan(b))
        fail("a negative number raised to a fractional power");
      return Value::number(result);
    }
    default:
      fail("float arithmetic for {}", symbol(op));
  }
}

Value repeat(const Value& sequence, std::int64_t times) {
  if (times <= 0)
    return sequence.is(Value::Type::String) ? Value::string("") : Value::list({}, sequence.as_list().is_tuple);
  const auto count = static_cast<std::size_t>(times);
  if (sequence.is(Value::Type::String)) {
    const std::string& s = sequence.as_string();
    if (!s.empty()) limits::check_bytes(count > limits::kMaxBytes ? count : s.size() * count);
    std::string out;
    out.reserve(s.size() * count);
    for (std::size_t i = 0; i < count && !s.empty(); ++i) out += s;
    return Value::string(std::move(out));
  }
  const List& list = sequence.as_list();
  if (!list.items.empty()) limits::check_items(count > limits::kMaxItems ? count : list.items.size() * count);
  std::vector<Value> items;
  for (std::size_t i = 0; i < count && !list.items.empty(); ++i)
    items.insert(items.end(), list.items.begin(), list.items.end());
  return Value::list(std::move(items), list.is_tuple);
}

bool is_sequence(const Value& v) { return v.is(Value::Type::String) || v.is(Value::Type::List); }

}  // namespace

Value unary_operation(UnaryOp op, const Value& operand) {
  if (op == UnaryOp::Not) return Value::boolean(!operand.truthy());
  const bool negate = op == UnaryOp::Negate;
  if (operand.is(Value::Type::Float)) return Value::number(negate ? -operand.as_float() : operand.as_float());
  if (is_integral(operand)) {
    const std::int64_t value = integral(operand);
    if (negate && value == INT64_MIN) fail("integer overflow");
    return Value::integer(negate ? -value : value);
  }
  fail("bad operand type for unary {}: '{}'", negate ? '-' : '+', operand.type_name());
}

Value binary_operation(BinaryOp op, const Value& left, const Value& right) {
  if (op == BinaryOp::Concat) {
    // Strings are joined without first copying them: `ns.s ~ ns.s` may be many megabytes.
    std::string left_storage, right_storage;
    const std::string& a = left.is(Value::Type::String) ? left.as_string() : (left_storage = to_str(left));
    const std::string& b = right.is(Value::Type::String) ? right.as_string() : (right_storage = to_str(right));
    limits::check_bytes(a.size() + b.size());
    std::string joined;
    joined.reserve(a.size() + b.size());
    joined.append(a).append(b);
    return Value::string(std::move(joined));
  }
  if (left.is_numeric() && right.is_numeric()) {
    if (op == BinaryOp::Divide) {
      if (right.to_double() == 0) fail("division by zero");
      return Value::number(left.to_double() / right.to_double());
    }
    if (is_integral(left) && is_integral(right)) return int_arithmetic(op, integral(left), integral(right));
    return float_arithmetic(op, left.to_double(), right.to_double());
  }
  if (op == BinaryOp::Add && left.type() == right.type() && is_sequence(left)) {
    if (left.is(Value::Type::String)) {
      limits::check_bytes(left.as_string().size() + right.as_string().size());
      return Value::string(left.as_string() + right.as_string());
    }
    const List &a = left.as_list(), &b = right.as_list();
    if (a.is_tuple != b.is_tuple) unsupported(op, left, right);
    limits::check_items(a.items.size() + b.items.size());
    std::vector<Value> items = a.items;
    items.insert(items.end(), b.items.begin(), b.items.end());
    return Value::list(std::move(items), a.is_tuple);
  }
  if (op == BinaryOp::Multiply) {
    if (is_sequence(left) && is_integral(right)) return repeat(left, integral(right));
    if (is_integral(left) && is_sequence(right)) return repeat(right, integral(left));
  }
  unsupported(op, left, right);
}

bool comparison(CompareOp op, const Value& left, const Value& right) {
  switch (op) {
    case CompareOp::Equal:
      return equals(left, right);
    case CompareOp::NotEqual:
      return !equals(left, right);
    case CompareOp::Less:
      return compare(left, right) < 0;
    case CompareOp::LessEqual:
      return compare(left, right) <= 0;
    case CompareOp::Greater:
      return compare(left, right) > 0;
    case CompareOp::GreaterEqual:
      return compare(left, right) >= 0;
    case CompareOp::In:
      return contains(right, left);
    case CompareOp::NotIn:
      return !contains(right, left);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::Undefined:
      return false;
    case Value::Type::String:
      if (!item.is(Value::Type::String))
        fail("'in <string>' requires string as left operand, not {}", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::List: {
      const auto& items = container.as_list().items;
      return std::any_of(items.begin(), items.end(), [&](const Value& v) { return equals(v, item); });
    }
    case Value::Type::Dict:
      return item.is(Value::Type::String) && container.as_dict().find(item.as_string()) != nullptr;
    default:
      fail("argument of type '{}' is not iterable", container.type_name());
  }
}

}  // namespace rf::jinja
