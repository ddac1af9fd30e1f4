#pragma once
// Parsing the names users and config files give enumerated choices (samplers, schedules).
#include <string>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace rf::stable_diffusion {

// The value named `name` in `names`; fails naming `what` and listing the known names.
template <typename Enum, std::size_t N>
Enum parse_name(std::string_view what, std::string_view name, const std::pair<std::string_view, Enum> (&names)[N]) {
  std::string known;
  for (const auto& [n, value] : names) {
    if (n == name) return value;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  fail("unknown {} '{}' (known: {})", what, name, known);
}

}  // namespace rf::stable_diffusion
