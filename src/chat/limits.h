#pragma once
// Bounds that keep a hostile or broken template from exhausting the stack, memory or time.
// Real chat templates stay far below all of them.
#include <cstddef>
#include <cstdint>

#include "chat/errors.h"

namespace rf::jinja::limits {

// Nesting of template blocks and expressions, of JSON input and of values being printed
// (a namespace can be stored inside itself; printing it must stop somewhere).
constexpr int kMaxNesting = 128;
// Macros calling macros (or themselves).
constexpr int kMaxCallDepth = 64;
// The rendered text and every string or list a template builds.
constexpr std::size_t kMaxBytes = std::size_t{32} << 20;
// Items of a list a template builds (list * n, list + list).
constexpr std::size_t kMaxItems = 1'000'000;
// Loop iterations plus macro calls in one render.
constexpr std::uint64_t kMaxSteps = 1'000'000;
// range() length: jinja2's sandbox refuses longer ranges too (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100'000;

inline void check_bytes(std::size_t bytes) {
  if (bytes > kMaxBytes) fail("text longer than {} bytes", kMaxBytes);
}

inline void check_items(std::size_t items) {
  if (items > kMaxItems) fail("list longer than {} items", kMaxItems);
}

}  // namespace rf::jinja::limits
