#include "util/memory_bound.h"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <utility>

#include "util/error.h"

namespace rf {

namespace {

// Binary units as KiB..TiB, decimal ones as kB..TB, in any case.
constexpr std::array<std::pair<std::string_view, double>, 8> kUnits = {{{"kib", 0x1p10},
                                                                       {"mib", 0x1p20},
                                                                       {"gib", 0x1p30},
                                                                       {"tib", 0x1p40},
                                                                       {"kb", 1e3},
                                                                       {"mb", 1e6},
                                                                       {"gb", 1e9},
                                                                       {"tb", 1e12}}};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

}  // namespace

MemoryBound parse_memory_bound(const std::string& value) {
  // CLI11 puts the option's name before these messages.
  constexpr std::string_view kForms =
      "a share of the device's memory above 0 and at most 1 (0.9), or a size (20GiB, 512MiB, 24GB)";
  double number = 0.0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || !std::isfinite(number)) fail("'{}': give {}", value, kForms);
  const std::string unit = lower(std::string_view(end, value.data() + value.size()));
  if (unit.empty()) {
    if (!(number > 0.0 && number <= 1.0)) fail("'{}': give {}", value, kForms);
    return {.share = number};
  }
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = number * scale;
    if (!(bytes >= 0x1p20 && bytes < 0x1p63)) fail("'{}': give a size from 1 MiB", value);
    return {.bytes = static_cast<std::uint64_t>(bytes)};
  }
  fail("'{}': unknown unit '{}'; give {}", value, std::string_view(end, value.data() + value.size()), kForms);
}

}  // namespace rf
