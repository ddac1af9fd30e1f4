#include "models/stable_diffusion/blocks.h"

namespace rf::stable_diffusion {

namespace {
// diffusers' Transformer2DModel and the VAE's attention normalise with GroupNorm(eps=1e-6).
constexpr float kAttentionNormEps = 1e-6f;
// BasicTransformerBlock's LayerNorms.
constexpr float kLayerNormEps = 1e-5f;
}  // namespace

ResnetBlock ResnetBlock::read(const ParameterReader& p, int in, int out, int time_dim, int groups, float eps) {
  ResnetBlock r;
  r.norm1 = p.norm("norm1", in);
  r.conv1 = p.conv("conv1", in, out, 3);
  if (time_dim > 0) r.time_emb_proj = p.linear("time_emb_proj", time_dim, out);
  r.norm2 = p.norm("norm2", out);
  r.conv2 = p.conv("conv2", out, out, 3);
  if (in != out) r.shortcut = p.conv("conv_shortcut", in, out, 1);
  r.groups = groups;
  r.eps = eps;
  return r;
}

Tensor ResnetBlock::forward(ImageBackend& b, const Tensor& x, const Tensor* time) const {
  Tensor h = b.conv2d(b.group_norm(x, norm1, groups, eps, true), conv1, 1, 1);
  if (time_emb_proj) h = b.add_per_channel(h, b.linear(*time, *time_emb_proj));
  h = b.conv2d(b.group_norm(h, norm2, groups, eps, true), conv2, 1, 1);
  return b.add(shortcut ? b.conv2d(x, *shortcut, 1, 0) : x, h);
}

AttentionBlock AttentionBlock::read(const ParameterReader& p, const Names& n, int width, int context_width, int heads) {
  return {p.linear(n.q, width, width, n.qkv_bias), p.linear(n.k, context_width, width, n.qkv_bias),
          p.linear(n.v, context_width, width, n.qkv_bias), p.linear(n.out, width, width), heads};
}

Tensor AttentionBlock::forward(ImageBackend& b, const Tensor& x, const Tensor& context, bool causal) const {
  const Tensor y = b.attention(b.linear(x, to_q), b.linear(context, to_k), b.linear(context, to_v), heads, causal);
  return b.linear(y, to_out);
}

SpatialTransformer SpatialTransformer::read(const ParameterReader& p, int channels, int heads, int depth,
                                            int context_width, bool linear_projection, int groups) {
  SpatialTransformer t;
  t.norm = p.norm("norm", channels);
  if (linear_projection) {
    t.proj_in = p.linear("proj_in", channels, channels);
    t.proj_out = p.linear("proj_out", channels, channels);
  } else {
    t.proj_in = p.conv("proj_in", channels, channels, 1);
    t.proj_out = p.conv("proj_out", channels, channels, 1);
  }
  const AttentionBlock::Names names{"to_q", "to_k", "to_v", "to_out.0", false};
  for (int i = 0; i < depth; ++i) {
    const ParameterReader block = p["transformer_blocks"][i];
    t.blocks.push_back({block.norm("norm1", channels), block.norm("norm2", channels), block.norm("norm3", channels),
                        AttentionBlock::read(block["attn1"], names, channels, channels, heads),
                        AttentionBlock::read(block["attn2"], names, channels, context_width, heads),
                        block.linear("ff.net.0.proj", channels, 8 * channels),
                        block.linear("ff.net.2", 4 * channels, channels)});
  }
  t.groups = groups;
  return t;
}

Tensor SpatialTransformer::forward(ImageBackend& b, const Tensor& x, const Tensor& context) const {
  const int height = x.dim(2), width = x.dim(3);
  Tensor h = b.group_norm(x, norm, groups, kAttentionNormEps, false);
  // SD 1.x projects with 1x1 convolutions on the image, SD 2 and SDXL with Linears on the tokens.
  if (const auto* conv = std::get_if<ConvWeights>(&proj_in)) {
    h = b.to_tokens(b.conv2d(h, *conv, 1, 0));
  } else {
    h = b.linear(b.to_tokens(h), std::get<LinearWeights>(proj_in));
  }
  for (const Block& block : blocks) {
    const Tensor normed = b.layer_norm(h, block.norm1, kLayerNormEps);
    h = b.add(h, block.self_attention.forward(b, normed, normed));
    h = b.add(h, block.cross_attention.forward(b, b.layer_norm(h, block.norm2, kLayerNormEps), context));
    const Tensor ff = b.geglu(b.linear(b.layer_norm(h, block.norm3, kLayerNormEps), block.ff_in));
    h = b.add(h, b.linear(ff, block.ff_out));
  }
  if (const auto* conv = std::get_if<ConvWeights>(&proj_out)) {
    h = b.conv2d(b.to_image(h, height, width), *conv, 1, 0);
  } else {
    h = b.to_image(b.linear(h, std::get<LinearWeights>(proj_out)), height, width);
  }
  return b.add(h, x);
}

VaeAttention VaeAttention::read(const ParameterReader& p, int channels, int groups) {
  const AttentionBlock::Names names{"to_q", "to_k", "to_v", "to_out.0", true};
  return {p.norm("group_norm", channels), AttentionBlock::read(p, names, channels, channels, 1), groups};
}

Tensor VaeAttention::forward(ImageBackend& b, const Tensor& x) const {
  const Tensor tokens = b.to_tokens(b.group_norm(x, norm, groups, kAttentionNormEps, false));
  return b.add(b.to_image(attention.forward(b, tokens, tokens), x.dim(2), x.dim(3)), x);
}

}  // namespace rf::stable_diffusion
