#pragma once
// The building blocks the UNet and the VAE share, as diffusers defines them (ResnetBlock2D,
// Attention, BasicTransformerBlock, Transformer2DModel, the VAE's mid-block attention, the
// resampling convolutions), each read from its parameters and run on an ImageBackend.
#include <optional>
#include <variant>
#include <vector>

#include "backend/image_backend.h"
#include "models/stable_diffusion/parameters.h"

namespace rf::stable_diffusion {

// GroupNorm + SiLU, conv 3x3, plus the time embedding's projection (UNet only), GroupNorm + SiLU,
// conv 3x3, plus the input (through a 1x1 conv where the width changes).
struct ResnetBlock {
  NormWeights norm1, norm2;
  ConvWeights conv1, conv2;
  std::optional<LinearWeights> time_emb_proj;
  std::optional<ConvWeights> shortcut;
  int groups = 32;
  float eps = 1e-5f;

  // time_dim 0: no time embedding (the VAE's blocks).
  static ResnetBlock read(const ParameterReader& p, int in, int out, int time_dim, int groups, float eps);
  // `time` is SiLU(time embedding) [batch, time_dim], or null without one.
  Tensor forward(ImageBackend& b, const Tensor& x, const Tensor* time) const;
};

// Multi-head attention with projections: queries from `x` [batch, tokens, width], keys and values
// from `context` (x itself for self-attention).
struct AttentionBlock {
  LinearWeights to_q, to_k, to_v, to_out;
  int heads = 1;

  // to_q/to_k/to_v under the given names (bias as `qkv_bias` says), to_out with a bias.
  struct Names {
    const char *q, *k, *v, *out;
    bool qkv_bias;
  };
  static AttentionBlock read(const ParameterReader& p, const Names& names, int width, int context_width, int heads);
  Tensor forward(ImageBackend& b, const Tensor& x, const Tensor& context, bool causal = false) const;
};

// diffusers' Transformer2DModel: GroupNorm, proj_in, `depth` BasicTransformerBlocks (self-attention,
// cross-attention over the text, GEGLU feed-forward, each after a LayerNorm and added back),
// proj_out, plus the input.
struct SpatialTransformer {
  struct Block {
    NormWeights norm1, norm2, norm3;
    AttentionBlock self_attention, cross_attention;
    LinearWeights ff_in, ff_out;
  };
  NormWeights norm;
  std::variant<ConvWeights, LinearWeights> proj_in, proj_out;
  std::vector<Block> blocks;
  int groups = 32;

  static SpatialTransformer read(const ParameterReader& p, int channels, int heads, int depth, int context_width,
                                 bool linear_projection, int groups);
  Tensor forward(ImageBackend& b, const Tensor& x, const Tensor& context) const;
};

// The VAE's mid-block attention: GroupNorm, one head over all pixels, plus the input.
struct VaeAttention {
  NormWeights norm;
  AttentionBlock attention;
  int groups = 32;

  static VaeAttention read(const ParameterReader& p, int channels, int groups);
  Tensor forward(ImageBackend& b, const Tensor& x) const;
};

}  // namespace rf::stable_diffusion
