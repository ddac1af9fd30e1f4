#pragma once
// The Python methods chat templates call: str.strip/split/startswith/..., dict.get/items/...
#include <optional>
#include <string_view>

#include "chat/value.h"

namespace rf::jinja {

// `receiver.name` as a function bound to the receiver, when the receiver's type has that method.
std::optional<Value> bound_method(const Value& receiver, std::string_view name);

// dict.items(): (key, value) tuples; also the items filter.
Value dict_items(const Object& dict);

}  // namespace rf::jinja
