#pragma once
// The one error type rocmforge throws for bad input (files, arguments, requests).
// Callers at the edge (CLI, server) turn it into a message and an exit code or HTTP status.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace rf
