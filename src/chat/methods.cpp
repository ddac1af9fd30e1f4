#include "chat/methods.h"

#include <algorithm>
#include <array>

#include "chat/arguments.h"
#include "chat/errors.h"
#include "chat/limits.h"
#include "chat/text.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

using Method = Value (*)(const Value& self, ArgumentReader& args);

Value strip_method(const Value& self, ArgumentReader& args, text::Side side) {
  return Value::string(text::strip(self.as_string(), side, args.next_string("chars")));
}

// startswith/endswith take a string or a tuple of strings.
template <bool AtStart>
Value affix_method(const Value& self, ArgumentReader& args) {
  const Value affix = args.required(AtStart ? "prefix" : "suffix");
  const std::string& s = self.as_string();
  const auto matches = [&](const Value& candidate) {
    if (!candidate.is(Value::Type::String)) {
      fail("{}() argument must be str or a tuple of str, not {}", args.callee(), candidate.type_name());
    }
    const std::string& a = candidate.as_string();
    return a.size() <= s.size() &&
           (AtStart ? s.compare(0, a.size(), a) : s.compare(s.size() - a.size(), a.size(), a)) == 0;
  };
  if (!affix.is(Value::Type::List)) return Value::boolean(matches(affix));
  const auto& items = affix.as_list().items;
  return Value::boolean(std::any_of(items.begin(), items.end(), matches));
}

template <std::string (*Transform)(std::string_view)>
Value case_method(const Value& self, ArgumentReader&) {
  return Value::string(Transform(self.as_string()));
}

Value split_method(const Value& self, ArgumentReader& args) {
  const std::optional<std::string> sep = args.next_string("sep");
  const long long maxsplit = args.next_int("maxsplit").value_or(-1);
  std::vector<Value> parts;
  for (std::string& part : text::split(self.as_string(), sep, maxsplit))
    parts.push_back(Value::string(std::move(part)));
  return Value::list(std::move(parts));
}

Value replace_method(const Value& self, ArgumentReader& args) {
  const Value old_part = args.required("old"), new_part = args.required("new");
  if (!old_part.is(Value::Type::String) || !new_part.is(Value::Type::String)) fail("replace() arguments must be str");
  const long long count = args.next_int("count").value_or(-1);
  return Value::string(text::replace(self.as_string(), old_part.as_string(), new_part.as_string(), count));
}

Value find_method(const Value& self, ArgumentReader& args) {
  const Value sub = args.required("sub");
  if (!sub.is(Value::Type::String)) fail("find() argument must be str, not {}", sub.type_name());
  const std::size_t found = self.as_string().find(sub.as_string());
  if (found == std::string::npos) return Value::integer(-1);
  return Value::integer(static_cast<std::int64_t>(text::length(std::string_view(self.as_string()).substr(0, found))));
}

Value join_method(const Value& self, ArgumentReader& args) {
  std::string out;
  bool first = true;
  for (const Value& item : iterate(args.required("iterable"))) {
    if (!item.is(Value::Type::String)) fail("join() expected str items, found {}", item.type_name());
    if (!first) out += self.as_string();
    out += item.as_string();
    limits::check_bytes(out.size());
    first = false;
  }
  return Value::string(std::move(out));
}

Value get_method(const Value& self, ArgumentReader& args) {
  const Value key = args.required("key");
  const Value fallback = args.next("default");
  const Value* found = key.is(Value::Type::String) ? self.as_dict().find(key.as_string()) : nullptr;
  if (found) return *found;
  return fallback.is_undefined() ? Value::none() : fallback;
}

Value items_method(const Value& self, ArgumentReader&) { return dict_items(self.as_dict()); }

Value keys_method(const Value& self, ArgumentReader&) { return Value::list(iterate(self)); }

Value values_method(const Value& self, ArgumentReader&) {
  std::vector<Value> values;
  for (const auto& entry : self.as_dict().entries) values.push_back(entry.second);
  return Value::list(std::move(values));
}

struct MethodEntry {
  Value::Type type;
  std::string_view name;
  Method method;
};

constexpr std::array<MethodEntry, 17> kMethods = {{
    {Value::Type::String, "strip",
     [](const Value& s, ArgumentReader& a) { return strip_method(s, a, text::Side::Both); }},
    {Value::Type::String, "lstrip",
     [](const Value& s, ArgumentReader& a) { return strip_method(s, a, text::Side::Left); }},
    {Value::Type::String, "rstrip",
     [](const Value& s, ArgumentReader& a) { return strip_method(s, a, text::Side::Right); }},
    {Value::Type::String, "startswith", affix_method<true>},
    {Value::Type::String, "endswith", affix_method<false>},
    {Value::Type::String, "split", split_method},
    {Value::Type::String, "replace", replace_method},
    {Value::Type::String, "find", find_method},
    {Value::Type::String, "join", join_method},
    {Value::Type::String, "upper", case_method<text::upper>},
    {Value::Type::String, "lower", case_method<text::lower>},
    {Value::Type::String, "title", case_method<text::title>},
    {Value::Type::String, "capitalize", case_method<text::capitalize>},
    {Value::Type::Dict, "get", get_method},
    {Value::Type::Dict, "items", items_method},
    {Value::Type::Dict, "keys", keys_method},
    {Value::Type::Dict, "values", values_method},
}};

}  // namespace

Value dict_items(const Object& dict) {
  std::vector<Value> pairs;
  for (const auto& [key, value] : dict.entries) pairs.push_back(Value::list({Value::string(key), value}, true));
  return Value::list(std::move(pairs));
}

std::optional<Value> bound_method(const Value& receiver, std::string_view name) {
  for (const MethodEntry& entry : kMethods) {
    if (entry.type == receiver.type() && entry.name == name) {
      const Method method = entry.method;
      return Value::function(std::string(name),
                             [receiver, method](ArgumentReader& args) { return method(receiver, args); });
    }
  }
  return std::nullopt;
}

}  // namespace rf::jinja
