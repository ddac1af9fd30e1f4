#include "chat/value.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "chat/errors.h"
#include "chat/limits.h"
#include "tokenizer/unicode.h"

namespace rf::jinja {
namespace {

Value convert(const nlohmann::ordered_json& json, int depth) {
  if (depth > limits::kMaxNesting) fail("input JSON is nested more than {} levels deep", limits::kMaxNesting);
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto value = json.get<std::uint64_t>();
      if (value > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(value));
      return Value::integer(static_cast<std::int64_t>(value));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object object;
      object.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) object.entries.emplace_back(key, convert(item, depth + 1));
      return Value::dict(std::move(object));
    }
    default:
      fail("unsupported JSON value of type {}", json.type_name());
  }
}

bool both_integral(const Value& a, const Value& b) { return !a.is(Value::Type::Float) && !b.is(Value::Type::Float); }

std::int64_t integral(const Value& v) { return v.is(Value::Type::Bool) ? v.as_bool() : v.as_int(); }

}  // namespace

const Value* Object::find(std::string_view key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [name, existing] : entries) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::none() { return Value(Data(nullptr)); }
Value Value::boolean(bool value) { return Value(Data(value)); }
Value Value::integer(std::int64_t value) { return Value(Data(value)); }
Value Value::number(double value) { return Value(Data(value)); }
Value Value::string(std::string value) { return Value(Data(std::move(value))); }
Value Value::list(std::vector<Value> items, bool is_tuple) {
  return Value(Data(std::make_shared<const List>(List{std::move(items), is_tuple})));
}
Value Value::dict(Object object) { return Value(Data(std::make_shared<const Object>(std::move(object)))); }
Value Value::make_namespace(std::shared_ptr<Namespace> ns) { return Value(Data(std::move(ns))); }
Value Value::function(std::string name, std::function<Value(ArgumentReader&)> call) {
  return Value(Data(std::make_shared<const Function>(Function{std::move(name), std::move(call)})));
}
Value Value::from_json(const nlohmann::ordered_json& json) { return convert(json, 0); }

double Value::to_double() const { return is(Type::Float) ? as_float() : static_cast<double>(integral(*this)); }

bool Value::truthy() const {
  switch (type()) {
    case Type::Undefined:
    case Type::None:
      return false;
    case Type::Bool:
      return as_bool();
    case Type::Int:
      return as_int() != 0;
    case Type::Float:
      return as_float() != 0.0;
    case Type::String:
      return !as_string().empty();
    case Type::List:
      return !as_list().items.empty();
    case Type::Dict:
      return !as_dict().entries.empty();
    case Type::Namespace:
    case Type::Function:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (type()) {
    case Type::Undefined:
      return "Undefined";
    case Type::None:
      return "NoneType";
    case Type::Bool:
      return "bool";
    case Type::Int:
      return "int";
    case Type::Float:
      return "float";
    case Type::String:
      return "str";
    case Type::List:
      return as_list().is_tuple ? "tuple" : "list";
    case Type::Dict:
      return "dict";
    case Type::Namespace:
      return "Namespace";
    case Type::Function:
      return "function";
  }
  return "?";
}

bool Value::same_as(const Value& other) const {
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::List:
      return &as_list() == &other.as_list();
    case Type::Dict:
      return &as_dict() == &other.as_dict();
    case Type::Namespace:
      return &as_namespace() == &other.as_namespace();
    case Type::Function:
      return &as_function() == &other.as_function();
    default:
      return equals(*this, other);
  }
}

bool equals(const Value& a, const Value& b) {
  using Type = Value::Type;
  if (a.is_numeric() && b.is_numeric()) {
    return both_integral(a, b) ? integral(a) == integral(b) : a.to_double() == b.to_double();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None:
      return true;
    case Type::String:
      return a.as_string() == b.as_string();
    case Type::List: {
      const List &x = a.as_list(), &y = b.as_list();
      return x.is_tuple == y.is_tuple &&
             std::equal(x.items.begin(), x.items.end(), y.items.begin(), y.items.end(), equals);
    }
    case Type::Dict: {
      const Object &x = a.as_dict(), &y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      return std::all_of(x.entries.begin(), x.entries.end(), [&](const auto& entry) {
        const Value* other = y.find(entry.first);
        return other && equals(entry.second, *other);
      });
    }
    default:
      return a.same_as(b);
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (both_integral(a, b)) return integral(a) < integral(b) ? -1 : integral(a) > integral(b);
    return a.to_double() < b.to_double() ? -1 : a.to_double() > b.to_double();
  }
  if (a.is(Value::Type::String) && b.is(Value::Type::String))
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() != b.as_string();
  if (a.is(Value::Type::List) && b.is(Value::Type::List)) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (const int order = compare(x[i], y[i])) return order;
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  fail("cannot compare '{}' with '{}'", a.type_name(), b.type_name());
}

std::vector<Value> iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::Undefined:
      return {};
    case Value::Type::List:
      return value.as_list().items;
    case Value::Type::Dict: {
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries) keys.push_back(Value::string(entry.first));
      return keys;
    }
    case Value::Type::String: {
      std::vector<Value> chars;
      for (std::string& c : characters(value.as_string())) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default:
      fail("'{}' object is not iterable", value.type_name());
  }
}

std::vector<std::string> characters(std::string_view text) {
  std::vector<std::string> chars;
  for (std::size_t pos = 0, size = 0; pos < text.size(); pos += size) {
    unicode::decode_utf8(text, pos, size);
    chars.emplace_back(text.substr(pos, size));
  }
  return chars;
}

}  // namespace rf::jinja
