#pragma once
// Stable Diffusion's self- and cross-attention (and the text encoder's causal attention), flash
// style (no queries x keys score matrix is stored), over q, k and v as the projections leave them,
// every head's columns side by side. A portable fp32 kernel (image_attention.cu) and, on NVIDIA's
// tensor cores, a non-causal one with f16 products (image_attention_mma.cu).
// backend/cpu/image_ops.h's attention is the reference.
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

// q and y are [batch][queries][heads * head_dim], k and v [batch][keys][heads * head_dim]; head h is
// columns [h * head_dim, (h + 1) * head_dim) of each row.
struct ImageAttentionShape {
  int batch = 0;
  int heads = 0;
  int queries = 0;
  int keys = 0;
  int head_dim = 0;
  bool causal = false;  // query i sees keys 0..i (queries == keys): CLIP's text attention
};

// y = softmax(q k^T * scale) v per head, in fp32.
bool image_attention_supports(int head_dim);  // 40, 64, 80, 128 and 160
void launch_image_attention(const float* q, const float* k, const float* v, const ImageAttentionShape& shape,
                            float scale, float* y, const DeviceContext& ctx);

// The same with the products on tensor cores, from k and v rounded to f16 (launch_round_to_16bit)
// and q rounded as it is read; softmax and sums in fp32. Available on CUDA devices of compute
// capability 8.0 and later, for the head widths image_attention_supports takes; not causal.
bool image_attention_mma_available(const DeviceContext& ctx, int head_dim);
void launch_image_attention_mma(const float* q, const std::uint16_t* k_half, const std::uint16_t* v_half,
                                const ImageAttentionShape& shape, float scale, float* y, const DeviceContext& ctx);

}  // namespace rf::gpu
