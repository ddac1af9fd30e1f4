#pragma once
// From a runtime value to a kernel's template argument: f(std::integral_constant<int, v>{}) for the one
// of kValues that v equals. Returns false, calling nothing, where none does.
#include <type_traits>

namespace rf::gpu {

template <int... kValues, class F>
bool with_constant(int v, F&& f) {
  return ((v == kValues && (f(std::integral_constant<int, kValues>{}), true)) || ...);
}

}  // namespace rf::gpu
