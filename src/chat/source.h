#pragma once
// The template text as jinja2 reads it, and positions in it for error messages.
#include <cstddef>
#include <string>
#include <string_view>

namespace rf::jinja {

// Newlines normalized to \n and a single trailing newline dropped (jinja2's defaults).
std::string normalize_source(std::string_view source);

// Throws rf::Error "chat template line L, column C: message"; columns count characters from 1.
[[noreturn]] void fail_at(std::string_view source, std::size_t offset, const std::string& message);

}  // namespace rf::jinja
