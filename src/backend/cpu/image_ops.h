#pragma once
// The operations of Stable Diffusion's networks besides the matrix products, in plain fp32: the CPU
// backend's implementation and the reference the GPU kernels are tested against. Images are NCHW
// (batch, channels, height, width), row-major; token sequences are [tokens][width].
#include <cstddef>

#include "backend/conv_shape.h"
#include "backend/activation.h"
#include "formats/weight_matrix.h"

namespace rf {
class ThreadPool;
}

namespace rf::cpu {

// y = conv2d(x, W) + bias (bias may be null), square kernels, zero padding. W is [out_channels]
// rows of in_channels * kernel * kernel values (PyTorch's [out, in, kh, kw] weight), in any stored
// type: the convolution runs as matrix products of W with x's patches, a band of output rows at a
// time, so that the patches never take more than a few MiB.
void conv2d(const ConvShape& shape, const float* x, const WeightMatrix& w, const float* bias, float* y,
            ThreadPool& pool);

// GroupNorm over each of `groups` groups of channels / groups channels of each image, then
// gamma * x + beta per channel; with `silu`, SiLU after it (ResNet blocks fuse the two).
struct GroupNormShape {
  int batch, channels, spatial;  // spatial: height * width
  int groups;
};
void group_norm(const GroupNormShape& shape, const float* x, const float* gamma, const float* beta, float eps,
                bool silu, float* y, ThreadPool& pool);

// LayerNorm of each of `rows` rows of n values, then gamma * x + beta.
void layer_norm(const float* x, std::size_t rows, std::size_t n, const float* gamma, const float* beta, float eps,
                float* y);

// GEGLU after its projection: each row of x holds `inner` values of the hidden state, then `inner`
// of the gate; y[r][i] = hidden[i] * gelu(gate[i]), GELU exact (erf).
void geglu(const float* x, std::size_t rows, std::size_t inner, float* y);

// y = act(x) element-wise: SiLU, exact GELU (erf) or QuickGELU (x * sigmoid(1.702 x), OpenAI CLIP's).
void activation(const float* x, std::size_t n, Activation kind, float* y);

// Nearest-neighbour upsampling by 2 of `planes` planes of height x width.
void upsample_nearest2x(const float* x, std::size_t planes, int height, int width, float* y);

// The sinusoidal embedding of n timesteps, `dim` values each (diffusers' get_timestep_embedding):
// frequencies max_period^(-i / (dim/2 - shift)); sin then cos, or cos then sin when flipped.
struct TimestepEmbedding {
  int dim;
  bool flip_sin_to_cos;
  float downscale_freq_shift;
  float max_period = 10000.0f;
};
void timestep_embedding(const float* timesteps, int n, const TimestepEmbedding& how, float* y);

// Non-causal attention of `batch_heads` independent heads: y[h][i] = softmax(q[h][i] . k[h]^T *
// scale) v[h], q [batch_heads][queries][dim], k and v [batch_heads][keys][dim].
// With `causal` (queries == keys), query i sees keys 0..i.
struct AttentionShape {
  int batch_heads, queries, keys, dim;
  bool causal = false;
};
void attention(const AttentionShape& shape, const float* q, const float* k, const float* v, float scale, float* y,
               ThreadPool& pool);
// The same as two matrix products per head around a row softmax (matmul.h's SIMD kernels, all
// threads), a band of queries at a time so that the scores stay bounded: the backend's path.
// attention() above, a plain loop, is its reference.
void attention_by_products(const AttentionShape& shape, const float* q, const float* k, const float* v, float scale,
                           float* y, ThreadPool& pool);

}  // namespace rf::cpu
