#pragma once
// The values a chat template computes with, shaped after the Python objects that jinja2 sees in
// transformers: undefined, None, bool, int, float, str, list/tuple, dict, namespace and callables.
// Lists and dicts are immutable (transformers renders in jinja2's immutable sandbox) and shared,
// so copying a Value never copies the conversation; only a namespace can change after creation.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rf::jinja {

class Value;
class ArgumentReader;

struct List {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes how it prints: (1, 2) instead of [1, 2]
};

// Keys keep their insertion order, as Python dicts and the JSON they come from do.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

// jinja2's namespace(): the one mutable value, so that loops can carry state out.
struct Namespace {
  Object attributes;
};

struct Function {
  std::string name;
  std::function<Value(ArgumentReader&)> call;
};

class Value {
 public:
  enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool value);
  static Value integer(std::int64_t value);
  static Value number(double value);
  static Value string(std::string value);
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(Object object);
  static Value make_namespace(std::shared_ptr<Namespace> ns);
  static Value function(std::string name, std::function<Value(ArgumentReader&)> call);
  // Throws rf::Error past the nesting limit.
  static Value from_json(const nlohmann::ordered_json& json);

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is(Type t) const { return type() == t; }
  bool is_undefined() const { return is(Type::Undefined); }
  bool is_numeric() const { return is(Type::Bool) || is(Type::Int) || is(Type::Float); }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  double as_float() const { return std::get<double>(data_); }
  double to_double() const;  // of a numeric value (bool, int or float)
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Object& as_dict() const { return *std::get<std::shared_ptr<const Object>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }

  bool truthy() const;
  // Python's name of the type, for error messages: 'str', 'dict', 'NoneType', ...
  const char* type_name() const;
  // Same object (Python's `is`): identity for containers, equality for scalars.
  bool same_as(const Value& other) const;

 private:
  using Data =
      std::variant<std::monostate, std::nullptr_t, bool, std::int64_t, double, std::string, std::shared_ptr<const List>,
                   std::shared_ptr<const Object>, std::shared_ptr<Namespace>, std::shared_ptr<const Function>>;
  static_assert(std::variant_size_v<Data> == 10, "Type lists Data's alternatives in order");
  explicit Value(Data data) : data_(std::move(data)) {}
  Data data_;
};

// Python's ==, which templates use on strings, numbers and whole messages alike.
bool equals(const Value& a, const Value& b);
// Python's ordering (<): numbers, strings and lists; throws rf::Error for other pairs.
int compare(const Value& a, const Value& b);

// What iterating a value gives: list items, dict keys, string characters; nothing for undefined.
std::vector<Value> iterate(const Value& value);
// Characters (code points) of a string, each a string; strings index and slice by these.
std::vector<std::string> characters(std::string_view text);

}  // namespace rf::jinja
