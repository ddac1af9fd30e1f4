#pragma once
// The functions every chat template can call: jinja2's range, dict and namespace, and the
// raise_exception and strftime_now that transformers adds.
#include <memory>
#include <vector>

#include "chat/value.h"

namespace rf::jinja {

// `created_namespaces` collects every namespace() made, so that the render can empty them at
// its end: a namespace may hold itself, and shared ownership alone would never free it.
Object global_functions(std::vector<std::shared_ptr<Namespace>>& created_namespaces);

}  // namespace rf::jinja
