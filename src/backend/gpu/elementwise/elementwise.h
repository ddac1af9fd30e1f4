#pragma once
// Elementwise kernels between the projections: SwiGLU (swiglu.cu) and bias adds (bias.cu).
#include <cstddef>

#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// out[i] = silu(gate[i]) * up[i] for n values; out may alias gate or up. Where `half` has data, out is
// also written there rounded.
void launch_swiglu(const float* gate, const float* up, std::size_t n, float* out, const DeviceContext& ctx, HalfCopy half = {});

// SwiGLU of a stacked gate and up product (each row `width` gate values, then `width` up values),
// written only as the 16-bit copy that the next GEMM multiplies: out.data[r * width + i].
void launch_swiglu_stacked(const float* gate_up, int rows, int width, HalfCopy out, const DeviceContext& ctx);

// x[r * width + i] += bias[i] for each of `rows` rows: Qwen2's q/k/v biases.
void launch_add_bias(float* x, const float* bias, int rows, int width, const DeviceContext& ctx);

}  // namespace rf::gpu
