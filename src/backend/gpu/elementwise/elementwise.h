#pragma once
// Elementwise kernels between the projections: SwiGLU and GeGLU (swiglu.cu), bias adds (bias.cu), the
// logits' soft cap (softcap.cu), and Stable Diffusion's GEGLU and upsampling (image_elementwise.cu).
#include <cstddef>

#include "backend/activation.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/runtime/device_context.h"
#include "model/config.h"

namespace rf::gpu {

// out[i] = act(gate[i]) * up[i] for n values (SiLU: SwiGLU; tanh GELU: Gemma's GeGLU); out may alias
// gate or up. Where `half` has data, out is also written there rounded.
void launch_glu(const float* gate, const float* up, std::size_t n, MlpActivation act, float* out, const DeviceContext& ctx,
                HalfCopy half = {});

// SwiGLU (SiLU only) of a stacked gate and up product (each row `width` gate values, then `width` up values),
// written only as the 16-bit copy that the next GEMM multiplies: out.data[r * width + i].
void launch_swiglu_stacked(const float* gate_up, int rows, int width, HalfCopy out, const DeviceContext& ctx);

// x[i] = cap * tanh(x[i] / cap) for n values: Gemma 2's cap on the final logits (softcap.cu).
void launch_softcap(float* x, std::size_t n, float cap, const DeviceContext& ctx);

// x[r * width + i] += bias[i] for each of `rows` rows: Qwen2's q/k/v biases.
void launch_add_bias(float* x, const float* bias, int rows, int width, const DeviceContext& ctx);

// Stable Diffusion's (image_elementwise.cu; backend/cpu/image_ops.h has the references):
// GEGLU after its projection: rows of `inner` hidden values then `inner` gate values, y[r][i] =
// hidden[i] * gelu(gate[i]) with the exact (erf) GELU.
void launch_geglu(const float* x, std::size_t rows, std::size_t inner, float* y, const DeviceContext& ctx);

// Nearest-neighbour upsampling by 2 of `planes` planes of height x width.
void launch_upsample_nearest2x(const float* x, std::size_t planes, int height, int width, float* y,
                               const DeviceContext& ctx);
// Nearest-neighbour resizing to any size, as torch's F.interpolate(mode="nearest").
void launch_resize_nearest(const float* x, std::size_t planes, int in_h, int in_w, int out_h, int out_w, float* y,
                           const DeviceContext& ctx);

// y = act(x) for n values (SiLU, exact GELU or QuickGELU); y may alias x.
void launch_activation(const float* x, std::size_t n, Activation kind, float* y, const DeviceContext& ctx);
// y = a + b for n values; y may alias a or b.
void launch_add(const float* a, const float* b, std::size_t n, float* y, const DeviceContext& ctx);
// y[p][i] = x[p][i] + v[p] for `planes` planes of `pixels` values (a time embedding added per channel).
void launch_add_per_plane(const float* x, const float* v, std::size_t planes, std::size_t pixels, float* y,
                          const DeviceContext& ctx);
// Planes of height x width into planes of (height + 1) x (width + 1), the new row and column zero.
void launch_pad_bottom_right(const float* x, std::size_t planes, int height, int width, float* y,
                             const DeviceContext& ctx);
// y[b][c][r][k] = x[b][r][c][k]: x [batch][rows][cols][inner] with its middle dimensions swapped
// (NCHW <-> tokens with inner 1; [tokens][heads][d] <-> [heads][tokens][d] with inner d).
void launch_transpose(const float* x, std::size_t batch, std::size_t rows, std::size_t cols, std::size_t inner, float* y,
                      const DeviceContext& ctx);

}  // namespace rf::gpu
