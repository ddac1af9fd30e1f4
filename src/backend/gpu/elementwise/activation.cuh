#pragma once
// SwiGLU's elementwise product, shared by the standalone kernel and the GEMV that fuses it.
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

__device__ __forceinline__ float swiglu(float gate, float up) {
  return gate / (1.0f + expf(-gate)) * up;  // the CPU reference's expression
}

}  // namespace rf::gpu
