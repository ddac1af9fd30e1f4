#include "chat/arguments.h"

#include <algorithm>

#include "chat/errors.h"

namespace rf::jinja {

Value ArgumentReader::next(std::string_view name) {
  if (positional_read_ < args_.positional.size()) {
    if (!keyword(name).is_undefined()) fail("{}() got multiple values for argument '{}'", callee_, name);
    return std::move(args_.positional[positional_read_++]);
  }
  ++positional_read_;  // later parameters may still come by position only after this one
  return keyword(name);
}

Value ArgumentReader::keyword(std::string_view name) {
  const auto found =
      std::find_if(args_.keyword.begin(), args_.keyword.end(), [&](const auto& k) { return k.first == name; });
  if (found == args_.keyword.end()) return {};
  Value value = std::move(found->second);
  args_.keyword.erase(found);
  return value;
}

namespace {

bool absent(const Value& value) { return value.is_undefined() || value.is(Value::Type::None); }

}  // namespace

std::optional<std::string> ArgumentReader::next_string(std::string_view name) {
  const Value value = next(name);
  if (absent(value)) return std::nullopt;
  if (!value.is(Value::Type::String)) fail("{}() argument '{}' must be str, not {}", callee_, name, value.type_name());
  return value.as_string();
}

std::optional<std::int64_t> ArgumentReader::next_int(std::string_view name) {
  const Value value = next(name);
  if (absent(value)) return std::nullopt;
  if (value.is(Value::Type::Bool)) return value.as_bool();
  if (!value.is(Value::Type::Int)) fail("{}() argument '{}' must be int, not {}", callee_, name, value.type_name());
  return value.as_int();
}

std::optional<bool> ArgumentReader::next_bool(std::string_view name) {
  const Value value = next(name);
  if (absent(value)) return std::nullopt;
  return value.truthy();
}

Value ArgumentReader::required(std::string_view name) {
  Value value = next(name);
  if (value.is_undefined()) fail("{}() missing required argument '{}'", callee_, name);
  return value;
}

std::vector<std::pair<std::string, Value>> ArgumentReader::rest_keywords() { return std::exchange(args_.keyword, {}); }

std::vector<Value> ArgumentReader::rest_positional() {
  std::vector<Value> rest;
  for (; positional_read_ < args_.positional.size(); ++positional_read_)
    rest.push_back(std::move(args_.positional[positional_read_]));
  return rest;
}

void ArgumentReader::finish() const {
  if (positional_read_ < args_.positional.size()) {
    fail("{}() takes {} positional argument(s) but {} were given", callee_, positional_read_, args_.positional.size());
  }
  if (!args_.keyword.empty())
    fail("{}() got an unexpected keyword argument '{}'", callee_, args_.keyword.front().first);
}

}  // namespace rf::jinja
