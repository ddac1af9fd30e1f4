#pragma once
// Whether a number read from a file or a request fits the type it is stored in. A static_cast of
// a double outside the target's range is undefined behaviour (for float too, not only integers),
// so every such number is checked before it is converted.
#include <cmath>
#include <concepts>
#include <limits>

namespace rf {

template <typename T>
  requires std::is_arithmetic_v<T>
inline bool fits_in(double x) {
  if constexpr (std::floating_point<T>) {
    return !std::isfinite(x) || std::abs(x) <= static_cast<double>(std::numeric_limits<T>::max());
  } else {
    // [min, max + 1): both ends are powers of two (or 0), which a double holds exactly.
    return x >= static_cast<double>(std::numeric_limits<T>::min()) &&
           x < std::ldexp(1.0, std::numeric_limits<T>::digits);
  }
}

}  // namespace rf
