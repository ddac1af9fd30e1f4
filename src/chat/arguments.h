#pragma once
// Arguments of a call, filter or test, read the way Python binds parameters: each by position
// or by keyword, and whatever is left unread is an error.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace rf::jinja {

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class ArgumentReader {
 public:
  ArgumentReader(std::string callee, Arguments args) : callee_(std::move(callee)), args_(std::move(args)) {}

  // The next parameter in order, given by position or as `name=`; undefined when absent.
  Value next(std::string_view name);
  // Typed forms of next(): absent or None gives nullopt, a value of another type an error.
  std::optional<std::string> next_string(std::string_view name);
  std::optional<std::int64_t> next_int(std::string_view name);
  std::optional<bool> next_bool(std::string_view name);
  // The next parameter, or an error naming it when absent.
  Value required(std::string_view name);
  // A keyword argument outside the parameter order (a call block's `caller`); may be undefined.
  Value keyword(std::string_view name);
  // All keyword arguments not read yet (namespace(), dict()).
  std::vector<std::pair<std::string, Value>> rest_keywords();
  // Positional arguments not read yet (the arguments of a test named by select()).
  std::vector<Value> rest_positional();
  // Throws for any argument that was not read.
  void finish() const;

  const std::string& callee() const { return callee_; }

 private:
  std::string callee_;
  Arguments args_;
  std::size_t positional_read_ = 0;
};

}  // namespace rf::jinja
