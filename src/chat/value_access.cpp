#include "chat/value_access.h"

#include <charconv>
#include <optional>

#include "chat/errors.h"
#include "chat/methods.h"

namespace rf::jinja {
namespace {

bool is_integral(const Value& v) { return v.is(Value::Type::Int) || v.is(Value::Type::Bool); }
std::int64_t integral(const Value& v) { return v.is(Value::Type::Bool) ? v.as_bool() : v.as_int(); }

// Python's index rules: negative counts from the end; outside the sequence is nothing.
std::optional<std::size_t> resolve_index(std::int64_t index, std::size_t size) {
  const auto signed_size = static_cast<std::int64_t>(size);
  if (index < 0) index += signed_size;
  if (index < 0 || index >= signed_size) return std::nullopt;
  return static_cast<std::size_t>(index);
}

std::optional<std::int64_t> slice_bound(const Value& bound, const char* which) {
  if (bound.is_undefined() || bound.is(Value::Type::None)) return std::nullopt;
  if (!is_integral(bound)) fail("slice {} must be an integer or None, not '{}'", which, bound.type_name());
  return integral(bound);
}

// Python's PySlice_AdjustIndices: the positions object[start:stop:step] visits.
std::vector<std::size_t> slice_positions(std::size_t size, const Value& start_value, const Value& stop_value,
                                         const Value& step_value) {
  const std::int64_t step = slice_bound(step_value, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  const auto n = static_cast<std::int64_t>(size);
  const auto adjust = [&](std::optional<std::int64_t> bound, std::int64_t absent) {
    if (!bound) return absent;
    std::int64_t index = *bound;
    if (index < 0) {
      index += n;
      if (index < 0) index = step < 0 ? -1 : 0;
    } else if (index >= n) {
      index = step < 0 ? n - 1 : n;
    }
    return index;
  };
  const std::int64_t start = adjust(slice_bound(start_value, "start"), step < 0 ? n - 1 : 0);
  const std::int64_t stop = adjust(slice_bound(stop_value, "stop"), step < 0 ? -1 : n);
  std::vector<std::size_t> positions;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    positions.push_back(static_cast<std::size_t>(i));
  return positions;
}

}  // namespace

Value get_attribute(const Value& object, std::string_view name) {
  if (object.is(Value::Type::Namespace)) {
    const Value* value = object.as_namespace().attributes.find(name);
    return value ? *value : Value();
  }
  if (std::optional<Value> method = bound_method(object, name)) return *method;
  if (object.is(Value::Type::Dict)) {
    const Value* value = object.as_dict().find(name);
    return value ? *value : Value();
  }
  return {};
}

Value get_item(const Value& object, const Value& key) {
  switch (object.type()) {
    case Value::Type::Dict:
      if (key.is(Value::Type::String)) {
        if (const Value* value = object.as_dict().find(key.as_string())) return *value;
      }
      break;
    case Value::Type::Namespace:
      return key.is(Value::Type::String) ? get_attribute(object, key.as_string()) : Value();
    case Value::Type::List:
      if (is_integral(key)) {
        const auto& items = object.as_list().items;
        const auto index = resolve_index(integral(key), items.size());
        return index ? items[*index] : Value();
      }
      break;
    case Value::Type::String:
      if (is_integral(key)) {
        const std::vector<std::string> chars = characters(object.as_string());
        const auto index = resolve_index(integral(key), chars.size());
        return index ? Value::string(chars[*index]) : Value();
      }
      break;
    default:
      return {};
  }
  if (key.is(Value::Type::String)) {
    if (std::optional<Value> method = bound_method(object, key.as_string())) return *method;
  }
  return {};
}

Value get_path(const Value& object, std::string_view path) {
  Value current = object;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string_view part =
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    std::int64_t index = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = !part.empty() && error == std::errc() && end == part.data() + part.size() && part[0] != '-';
    current = get_item(current, numeric ? Value::integer(index) : Value::string(std::string(part)));
    if (dot == std::string_view::npos) return current;
    start = dot + 1;
  }
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is(Value::Type::String)) {
    const std::vector<std::string> chars = characters(object.as_string());
    std::string out;
    for (const std::size_t i : slice_positions(chars.size(), start, stop, step)) out += chars[i];
    return Value::string(std::move(out));
  }
  if (object.is(Value::Type::List)) {
    const List& list = object.as_list();
    std::vector<Value> items;
    for (const std::size_t i : slice_positions(list.items.size(), start, stop, step)) items.push_back(list.items[i]);
    return Value::list(std::move(items), list.is_tuple);
  }
  if (object.is_undefined()) return {};
  fail("'{}' object is not subscriptable", object.type_name());
}

}  // namespace rf::jinja
