#pragma once
// Member access as jinja2 does it: `obj.name` tries the Python attribute (a method such as
// dict.items) before the item, `obj[key]` the item before the attribute. What is missing is
// undefined, never an error.
#include <string_view>

#include "chat/value.h"

namespace rf::jinja {

Value get_attribute(const Value& object, std::string_view name);
Value get_item(const Value& object, const Value& key);
// A dotted path of items, as filters take them: "function.name", "content.0".
Value get_path(const Value& object, std::string_view path);
// object[start:stop:step] of a list or string; absent bounds are undefined or none.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace rf::jinja
