#pragma once
// Errors raised while a template is lexed, parsed or rendered. Code deep inside (filters,
// operators) throws TemplateError without knowing where it is; the interpreter prefixes the
// line and column of the expression it was evaluating and rethrows a plain rf::Error.
#include <fmt/format.h>

#include "util/error.h"

namespace rf::jinja {

class TemplateError : public rf::Error {
 public:
  using rf::Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw TemplateError(fmt::format(format, std::forward<Args>(args)...));
}

// raise_exception(message) from the template: the message reaches the caller unchanged, since
// it is meant for whoever sent the conversation ("roles must alternate ...").
class RaisedError : public rf::Error {
 public:
  using rf::Error::Error;
};

}  // namespace rf::jinja
