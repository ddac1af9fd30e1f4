#pragma once
// Values as text, the way Python writes them: str() for output and `~`, repr() inside
// containers, and json.dumps() for tojson (transformers' own tojson, not jinja2's HTML-safe one).
#include <optional>
#include <string>

#include "chat/value.h"

namespace rf::jinja {

// str(value): strings as they are, undefined as nothing, everything else as Python's repr()
// (True, None, 0.5, 1e-05, [1, 'a'], {'k': (1, 2)}).
std::string to_str(const Value& value);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): one level's indentation
  std::string item_separator = ", ";  // "," when indenting, as json.dumps does
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
std::string to_json(const Value& value, const JsonOptions& options = {});

}  // namespace rf::jinja
