#pragma once
// Argument checks of the launch_* wrappers. Plain strings: the .cu files that call these cannot use
// fmt's compile-time-checked format strings under nvcc.
#include <cstdint>

namespace rf::gpu {

// Throws rf::Error("<launch>: <problem>").
[[noreturn]] void throw_bad_launch(const char* launch, const char* problem);

inline void require(bool ok, const char* launch, const char* problem) {
  if (!ok) throw_bad_launch(launch, problem);
}

inline bool is_aligned(const void* p, int alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

}  // namespace rf::gpu
