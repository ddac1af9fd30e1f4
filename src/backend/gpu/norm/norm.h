#pragma once
// RMSNorm, fused with the residual add before it, and Qwen3's per-head q/k norm (rms_norm.cu);
// GroupNorm and LayerNorm, Stable Diffusion's (group_norm.cu).
#include <cstddef>

#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// For each of `rows` rows of n values: x += residual (when residual is not null), then
// out = x / rms(x) * weight: the residual update fused with the next norm. out may alias x. Where
// `rounded` has codes, out is also rounded into it (launch_quantize_activations), and where `half` has
// data, into that; both in the same pass where rows fit in registers.
void launch_rms_norm(float* x, const float* residual, const float* weight, int rows, int n, float eps, float* out,
                     const DeviceContext& ctx, QuantizedActivations rounded = {}, HalfCopy half = {});

// Qwen3's q/k norm, in place: every head of q ([n_tokens, q_dim]) and k ([n_tokens, kv_dim]) is
// rms-normalised over head_dim with the weight shared by all heads of q (q_weight) or k (k_weight).
void launch_qk_norm(float* q, float* k, const float* q_weight, const float* k_weight, int n_tokens, HeadShape shape,
                    float eps, const DeviceContext& ctx);

// Scratch launch_group_norm needs for this shape: the moments of the chunks each group is cut into.
std::size_t group_norm_workspace_bytes(int batch, int channels, int spatial, int groups);

// GroupNorm of NCHW images: each image's channels in `groups` groups, each group normalised over its
// channels and `spatial` positions, then gamma * x + beta per channel; with silu_after, SiLU after
// it. y may alias x. workspace holds group_norm_workspace_bytes of the same shape.
// backend/cpu/image_ops.h's group_norm is the reference.
void launch_group_norm(const float* x, int batch, int channels, int spatial, int groups, const float* gamma,
                       const float* beta, float eps, bool silu_after, float* y, void* workspace,
                       const DeviceContext& ctx);

// LayerNorm of each of `rows` rows of n values, then gamma * x + beta. y may alias x.
void launch_layer_norm(const float* x, int rows, int n, const float* gamma, const float* beta, float eps, float* y,
                       const DeviceContext& ctx);

}  // namespace rf::gpu
