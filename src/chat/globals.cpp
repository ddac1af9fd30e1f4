#include "chat/globals.h"

#include <ctime>

#include "chat/arguments.h"
#include "chat/errors.h"
#include "chat/limits.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

Value range(ArgumentReader& args) {
  const std::int64_t first = args.next_int("start").value_or(0);
  const std::optional<std::int64_t> second = args.next_int("stop");
  const std::int64_t step = args.next_int("step").value_or(1);
  if (step == 0) fail("range() arg 3 must not be zero");
  const std::int64_t start = second ? first : 0, stop = second ? *second : first;
  // Counted in long double: stop - start can overflow 64 bits.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  const long double count = span / static_cast<long double>(step);
  if (count > static_cast<long double>(limits::kMaxRange)) {
    fail("range() of more than {} items (the sandbox's limit)", limits::kMaxRange);
  }
  std::vector<Value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
  return Value::list(std::move(items));
}

Object keywords_object(ArgumentReader& args) {
  Object object;
  for (auto& [name, value] : args.rest_keywords()) object.set(std::move(name), std::move(value));
  return object;
}

Value make_dict(ArgumentReader& args) { return Value::dict(keywords_object(args)); }

[[noreturn]] Value raise_exception(ArgumentReader& args) { throw RaisedError(to_str(args.next("message"))); }

// datetime.now().strftime(format), in local time like transformers.
Value strftime_now(ArgumentReader& args) {
  const std::optional<std::string> format = args.next_string("format");
  if (!format) fail("strftime_now() missing required argument 'format'");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[512];
  const std::size_t size = std::strftime(buffer, sizeof buffer, format->c_str(), &local);
  if (size == 0 && !format->empty()) fail("strftime_now(): format too long or invalid");
  return Value::string(std::string(buffer, size));
}

}  // namespace

Object global_functions(std::vector<std::shared_ptr<Namespace>>& created_namespaces) {
  Object globals;
  globals.set("range", Value::function("range", range));
  globals.set("dict", Value::function("dict", make_dict));
  globals.set("raise_exception", Value::function("raise_exception", raise_exception));
  globals.set("strftime_now", Value::function("strftime_now", strftime_now));
  globals.set("namespace", Value::function("namespace", [&created_namespaces](ArgumentReader& args) {
                auto ns = std::make_shared<Namespace>();
                const Value initial = args.next("initial");
                if (initial.is(Value::Type::Dict)) {
                  ns->attributes = initial.as_dict();
                } else if (!initial.is_undefined()) {
                  fail("namespace() takes a dict, not '{}'", initial.type_name());
                }
                for (auto& [name, value] : keywords_object(args).entries)
                  ns->attributes.set(std::move(name), std::move(value));
                created_namespaces.push_back(ns);
                return Value::make_namespace(std::move(ns));
              }));
  return globals;
}

}  // namespace rf::jinja
