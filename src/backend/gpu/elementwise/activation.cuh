#pragma once
// The gated MLPs' elementwise products: SwiGLU's, shared by the standalone kernel and the GEMV that
// fuses it, and Gemma's GeGLU (tanh GELU). The expressions are the CPU references' (backend/cpu/ops.cpp).
#include "backend/gpu/runtime/vendor.h"
#include "model/config.h"

namespace rf::gpu {

__device__ __forceinline__ float swiglu(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

__device__ __forceinline__ float geglu_tanh(float gate, float up) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * gate * (1.0f + tanhf(kSqrt2OverPi * (gate + 0.044715f * gate * gate * gate))) * up;
}

__device__ __forceinline__ float glu(float gate, float up, MlpActivation act) {
  return act == MlpActivation::GeluTanh ? geglu_tanh(gate, up) : swiglu(gate, up);
}

}  // namespace rf::gpu
