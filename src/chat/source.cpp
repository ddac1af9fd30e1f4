#include "chat/source.h"

#include <fmt/format.h>

#include "util/error.h"

namespace rf::jinja {

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
      continue;
    }
    out += '\n';
    if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void fail_at(std::string_view source, std::size_t offset, const std::string& message) {
  int line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xc0) != 0x80) {  // not a UTF-8 continuation byte
      ++column;
    }
  }
  throw Error(fmt::format("chat template line {}, column {}: {}", line, column, message));
}

}  // namespace rf::jinja
