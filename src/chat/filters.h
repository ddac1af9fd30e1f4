#pragma once
// jinja2's built-in filters (`value | name(args)`) that chat templates use, plus transformers'
// tojson.
#include <string_view>

#include "chat/arguments.h"

namespace rf::jinja {

bool has_filter(std::string_view name);
Value apply_filter(std::string_view name, const Value& input, ArgumentReader& args);

}  // namespace rf::jinja
