#pragma once
// jinja2's tests: the names after `is`, as in `x is defined` or `n is divisibleby(3)`.
#include <string_view>

#include "chat/arguments.h"

namespace rf::jinja {

bool has_test(std::string_view name);
bool apply_test(std::string_view name, const Value& value, ArgumentReader& args);

}  // namespace rf::jinja
