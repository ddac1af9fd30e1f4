#include "chat/filters.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "chat/errors.h"
#include "chat/limits.h"
#include "chat/methods.h"
#include "chat/predicates.h"
#include "chat/text.h"
#include "chat/value_access.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

using Type = Value::Type;
using FilterFunction = Value (*)(const Value& input, ArgumentReader& args);

template <std::string (*Transform)(std::string_view)>
Value text_filter(const Value& input, ArgumentReader&) {
  return Value::string(Transform(to_str(input)));
}

Value trim(const Value& input, ArgumentReader& args) {
  return Value::string(text::strip(to_str(input), text::Side::Both, args.next_string("chars")));
}

Value replace(const Value& input, ArgumentReader& args) {
  const std::optional<std::string> old_part = args.next_string("old"), new_part = args.next_string("new");
  if (!old_part || !new_part) fail("replace() needs the old and new strings");
  return Value::string(text::replace(to_str(input), *old_part, *new_part, args.next_int("count").value_or(-1)));
}

Value length(const Value& input, ArgumentReader&) {
  switch (input.type()) {
    case Type::Undefined:
      return Value::integer(0);
    case Type::String:
      return Value::integer(static_cast<std::int64_t>(text::length(input.as_string())));
    case Type::List:
      return Value::integer(static_cast<std::int64_t>(input.as_list().items.size()));
    case Type::Dict:
      return Value::integer(static_cast<std::int64_t>(input.as_dict().entries.size()));
    default:
      fail("object of type '{}' has no len()", input.type_name());
  }
}

Value default_value(const Value& input, ArgumentReader& args) {
  const Value fallback = args.next("default_value");
  const bool boolean = args.next_bool("boolean").value_or(false);
  if (input.is_undefined() || (boolean && !input.truthy()))
    return fallback.is_undefined() ? Value::string("") : fallback;
  return input;
}

Value first(const Value& input, ArgumentReader&) {
  const std::vector<Value> items = iterate(input);
  return items.empty() ? Value() : items.front();
}

Value last(const Value& input, ArgumentReader&) {
  const std::vector<Value> items = iterate(input);
  return items.empty() ? Value() : items.back();
}

Value to_list(const Value& input, ArgumentReader&) { return Value::list(iterate(input)); }

Value items(const Value& input, ArgumentReader&) {
  if (input.is_undefined()) return Value::list({});
  if (!input.is(Type::Dict)) fail("items() needs a mapping, not '{}'", input.type_name());
  return dict_items(input.as_dict());
}

Value reverse(const Value& input, ArgumentReader&) {
  std::vector<Value> reversed = iterate(input);
  std::reverse(reversed.begin(), reversed.end());
  if (!input.is(Type::String)) return Value::list(std::move(reversed));
  std::string out;
  for (const Value& c : reversed) out += c.as_string();
  return Value::string(std::move(out));
}

Value join(const Value& input, ArgumentReader& args) {
  const std::string separator = args.next_string("d").value_or("");
  const std::optional<std::string> attribute = args.next_string("attribute");
  std::string out;
  bool first_item = true;
  for (const Value& item : iterate(input)) {
    if (!first_item) out += separator;
    out += to_str(attribute ? get_path(item, *attribute) : item);
    limits::check_bytes(out.size());
    first_item = false;
  }
  return Value::string(std::move(out));
}

Value to_string(const Value& input, ArgumentReader&) { return Value::string(to_str(input)); }

// jinja2's int: strings as integers, else as floats truncated; anything else gives the default.
Value to_int(const Value& input, ArgumentReader& args) {
  const Value fallback = args.next("default");
  const int base = static_cast<int>(args.next_int("base").value_or(10));
  const Value result_default = fallback.is_undefined() ? Value::integer(0) : fallback;
  const auto from_double = [&](double value) {
    if (!std::isfinite(value) || std::fabs(value) >= 9.2e18) return result_default;
    return Value::integer(static_cast<std::int64_t>(value));
  };
  switch (input.type()) {
    case Type::Bool:
      return Value::integer(input.as_bool());
    case Type::Int:
      return input;
    case Type::Float:
      return from_double(input.as_float());
    case Type::String: {
      const std::string s = text::strip(input.as_string(), text::Side::Both);
      std::int64_t integer = 0;
      if (base >= 2 && base <= 36) {
        const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), integer, base);
        if (error == std::errc() && end == s.data() + s.size() && !s.empty()) return Value::integer(integer);
      }
      double number = 0;
      const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), number);
      if (error == std::errc() && end == s.data() + s.size() && !s.empty()) return from_double(number);
      return result_default;
    }
    default:
      return result_default;
  }
}

Value to_float(const Value& input, ArgumentReader& args) {
  const Value fallback = args.next("default");
  if (input.is_numeric()) return Value::number(input.to_double());
  if (input.is(Type::String)) {
    const std::string s = text::strip(input.as_string(), text::Side::Both);
    double number = 0;
    const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), number);
    if (error == std::errc() && end == s.data() + s.size() && !s.empty()) return Value::number(number);
  }
  return fallback.is_undefined() ? Value::number(0.0) : fallback;
}

Value absolute(const Value& input, ArgumentReader&) {
  if (input.is(Type::Float)) return Value::number(std::fabs(input.as_float()));
  if (input.is(Type::Bool)) return Value::integer(input.as_bool());
  if (input.is(Type::Int)) {
    if (input.as_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(std::llabs(input.as_int()));
  }
  fail("bad operand type for abs(): '{}'", input.type_name());
}

// round(precision, method): 'common' is Python's round (half to even), else floor or ceil.
Value round_number(const Value& input, ArgumentReader& args) {
  const std::int64_t precision = args.next_int("precision").value_or(0);
  const std::string method = args.next_string("method").value_or("common");
  if (method != "common" && method != "floor" && method != "ceil") fail("method must be 'common', 'ceil' or 'floor'");
  if (!input.is_numeric()) fail("round() needs a number, not '{}'", input.type_name());
  if (!input.is(Type::Float) && method == "common" && precision >= 0)
    return Value::integer(static_cast<std::int64_t>(input.to_double()));
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = input.to_double() * scale;
  const double rounded = method == "floor"  ? std::floor(scaled)
                         : method == "ceil" ? std::ceil(scaled)
                                            : std::nearbyint(scaled);
  return Value::number(rounded / scale);
}

// The key a sort compares: an attribute of the item if asked, strings folded to lower case
// unless the sort is case sensitive.
Value sort_key(const Value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  Value key = attribute ? get_path(item, *attribute) : item;
  if (!case_sensitive && key.is(Type::String)) return Value::string(text::lower(key.as_string()));
  return key;
}

Value sort(const Value& input, ArgumentReader& args) {
  const bool reversed = args.next_bool("reverse").value_or(false);
  const bool case_sensitive = args.next_bool("case_sensitive").value_or(false);
  const std::optional<std::string> attribute = args.next_string("attribute");
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (Value& item : iterate(input)) keyed.emplace_back(sort_key(item, attribute, case_sensitive), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reversed ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  std::vector<Value> sorted;
  for (auto& entry : keyed) sorted.push_back(std::move(entry.second));
  return Value::list(std::move(sorted));
}

Value dictsort(const Value& input, ArgumentReader& args) {
  const bool case_sensitive = args.next_bool("case_sensitive").value_or(false);
  const std::string by = args.next_string("by").value_or("key");
  const bool reversed = args.next_bool("reverse").value_or(false);
  if (by != "key" && by != "value") fail("dictsort() by must be 'key' or 'value'");
  if (!input.is(Type::Dict)) fail("dictsort() needs a mapping, not '{}'", input.type_name());
  std::vector<Value> pairs = dict_items(input.as_dict()).as_list().items;
  const std::size_t index = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value x = sort_key(a.as_list().items[index], std::nullopt, case_sensitive);
    const Value y = sort_key(b.as_list().items[index], std::nullopt, case_sensitive);
    return reversed ? compare(y, x) < 0 : compare(x, y) < 0;
  });
  return Value::list(std::move(pairs));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...): without a
// test, the item's truth decides.
template <bool OnAttribute, bool Keep>
Value filter_items(const Value& input, ArgumentReader& args) {
  std::optional<std::string> attribute;
  if (OnAttribute) {
    attribute = args.next_string("attribute");
    if (!attribute) fail("{}() needs an attribute name", args.callee());
  }
  const std::optional<std::string> test = args.next_string("test");
  if (test && !has_test(*test)) fail("no test named '{}'", *test);
  const std::vector<Value> test_args = args.rest_positional();
  std::vector<Value> kept;
  for (const Value& item : iterate(input)) {
    const Value subject = attribute ? get_path(item, *attribute) : item;
    bool passes;
    if (test) {
      ArgumentReader test_reader(*test, Arguments{test_args, {}});
      passes = apply_test(*test, subject, test_reader);
    } else {
      passes = subject.truthy();
    }
    if (passes == Keep) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

// map(attribute='name', default=...) or map('filter', args...).
Value map_items(const Value& input, ArgumentReader& args) {
  const Value attribute = args.keyword("attribute");
  std::vector<Value> mapped;
  if (!attribute.is_undefined()) {
    if (!attribute.is(Type::String)) fail("map() attribute must be a string");
    const Value fallback = args.keyword("default");
    for (const Value& item : iterate(input)) {
      Value value = get_path(item, attribute.as_string());
      mapped.push_back(value.is_undefined() && !fallback.is_undefined() ? fallback : std::move(value));
    }
    return Value::list(std::move(mapped));
  }
  const std::optional<std::string> filter = args.next_string("filter");
  if (!filter) fail("map() needs a filter name or attribute=");
  if (!has_filter(*filter)) fail("no filter named '{}'", *filter);
  const std::vector<Value> filter_args = args.rest_positional();
  const std::vector<std::pair<std::string, Value>> filter_keywords = args.rest_keywords();
  for (const Value& item : iterate(input)) {
    ArgumentReader filter_reader(*filter, Arguments{filter_args, filter_keywords});
    mapped.push_back(apply_filter(*filter, item, filter_reader));
  }
  return Value::list(std::move(mapped));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson(const Value& input, ArgumentReader& args) {
  JsonOptions options;
  options.ensure_ascii = args.next_bool("ensure_ascii").value_or(false);
  const Value indent = args.next("indent");
  if (indent.is(Type::Int) || indent.is(Type::Bool)) {
    const auto width =
        static_cast<std::size_t>(std::max<std::int64_t>(indent.is(Type::Bool) ? indent.as_bool() : indent.as_int(), 0));
    limits::check_bytes(width);
    options.indent = std::string(width, ' ');
  } else if (indent.is(Type::String)) {
    options.indent = indent.as_string();
  } else if (!indent.is_undefined() && !indent.is(Type::None)) {
    fail("tojson() indent must be an integer or a string");
  }
  if (options.indent) options.item_separator.assign(1, ',');  // json.dumps drops the space when indenting
  const Value separators = args.next("separators");
  if (separators.is(Type::List)) {
    const auto& parts = separators.as_list().items;
    if (parts.size() != 2 || !parts[0].is(Type::String) || !parts[1].is(Type::String)) {
      fail("tojson() separators must be two strings");
    }
    options.item_separator = parts[0].as_string();
    options.key_separator = parts[1].as_string();
  } else if (!separators.is_undefined() && !separators.is(Type::None)) {
    fail("tojson() separators must be two strings");
  }
  options.sort_keys = args.next_bool("sort_keys").value_or(false);
  return Value::string(to_json(input, options));
}

// jinja2's indent: every line but the first (unless `first`) and blank ones (unless `blank`).
Value indent(const Value& input, ArgumentReader& args) {
  const Value width = args.next("width");
  std::string indentation(4, ' ');
  if (width.is(Type::String)) {
    indentation = width.as_string();
  } else if (width.is(Type::Int)) {
    limits::check_bytes(static_cast<std::size_t>(std::max<std::int64_t>(width.as_int(), 0)));
    indentation.assign(static_cast<std::size_t>(std::max<std::int64_t>(width.as_int(), 0)), ' ');
  }
  const bool indent_first = args.next_bool("first").value_or(false);
  const bool indent_blank = args.next_bool("blank").value_or(false);
  std::string out;
  bool first_line = true;
  for (const std::string& line : text::split(to_str(input), std::string_view("\n"), -1)) {
    if (!first_line) out += '\n';
    if ((first_line ? indent_first : true) && (indent_blank || !line.empty())) out += indentation;
    out += line;
    limits::check_bytes(out.size());
    first_line = false;
  }
  return Value::string(std::move(out));
}

Value safe(const Value& input, ArgumentReader&) { return input; }

struct FilterEntry {
  std::string_view name;
  FilterFunction function;
};

constexpr std::array<FilterEntry, 31> kFilters = {{
    {"abs", absolute},
    {"capitalize", text_filter<text::capitalize>},
    {"count", length},
    {"d", default_value},
    {"default", default_value},
    {"dictsort", dictsort},
    {"first", first},
    {"float", to_float},
    {"indent", indent},
    {"int", to_int},
    {"items", items},
    {"join", join},
    {"last", last},
    {"length", length},
    {"list", to_list},
    {"lower", text_filter<text::lower>},
    {"map", map_items},
    {"reject", filter_items<false, false>},
    {"rejectattr", filter_items<true, false>},
    {"replace", replace},
    {"reverse", reverse},
    {"round", round_number},
    {"safe", safe},
    {"select", filter_items<false, true>},
    {"selectattr", filter_items<true, true>},
    {"sort", sort},
    {"string", to_string},
    {"title", text_filter<text::title_words>},
    {"tojson", tojson},
    {"trim", trim},
    {"upper", text_filter<text::upper>},
}};

const FilterEntry* find_filter(std::string_view name) {
  for (const FilterEntry& entry : kFilters) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace

bool has_filter(std::string_view name) { return find_filter(name) != nullptr; }

Value apply_filter(std::string_view name, const Value& input, ArgumentReader& args) {
  const FilterEntry* entry = find_filter(name);
  if (!entry) fail("no filter named '{}'", name);
  Value result = entry->function(input, args);
  args.finish();
  return result;
}

}  // namespace rf::jinja
