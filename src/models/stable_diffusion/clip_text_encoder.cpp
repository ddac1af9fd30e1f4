#include "models/stable_diffusion/clip_text_encoder.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace rf::stable_diffusion {

ClipTextEncoder::ClipTextEncoder(const TensorSet& tensors, const ClipTextConfig& c, ImageBackend& backend)
    : config_(c), backend_(backend) {
  const ParameterReader p = ParameterReader(tensors, backend)["text_model"];
  token_embedding_ = p["embeddings"].matrix("token_embedding.weight", c.vocab_size, c.hidden);
  position_embedding_ = p["embeddings"].matrix("position_embedding.weight", c.max_positions, c.hidden);
  const AttentionBlock::Names names{"q_proj", "k_proj", "v_proj", "out_proj", true};
  for (int i = 0; i < c.layers; ++i) {
    const ParameterReader layer = p["encoder"]["layers"][i];
    layers_.push_back({layer.norm("layer_norm1", c.hidden), layer.norm("layer_norm2", c.hidden),
                       AttentionBlock::read(layer["self_attn"], names, c.hidden, c.hidden, c.heads),
                       layer["mlp"].linear("fc1", c.hidden, c.intermediate),
                       layer["mlp"].linear("fc2", c.intermediate, c.hidden)});
  }
  final_norm_ = p.norm("final_layer_norm", c.hidden);
  if (c.projection_dim > 0) {
    projection_ = ParameterReader(tensors, backend).linear("text_projection", c.hidden, c.projection_dim, false);
  }
}

ClipTextOutput ClipTextEncoder::forward(std::span<const int> ids) const {
  ImageBackend& b = backend_;
  const int tokens = config_.max_positions, hidden = config_.hidden;
  if (ids.empty() || ids.size() % tokens) fail("the text encoder takes windows of {} tokens", tokens);
  const int windows = static_cast<int>(ids.size() / tokens);

  std::vector<int> positions(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) positions[i] = static_cast<int>(i % tokens);
  Tensor x = b.add(b.embed(token_embedding_, ids), b.embed(position_embedding_, positions))
                 .reshaped({windows, tokens, hidden});
  const Activation act = config_.quick_gelu ? Activation::quick_gelu : Activation::gelu;
  Tensor penultimate = x;
  for (const Layer& layer : layers_) {
    penultimate = x;
    const Tensor normed = b.layer_norm(x, layer.norm1, config_.layer_norm_eps);
    x = b.add(x, layer.attention.forward(b, normed, normed, true));
    const Tensor mlp = b.activation(b.linear(b.layer_norm(x, layer.norm2, config_.layer_norm_eps), layer.fc1), act);
    x = b.add(x, b.linear(mlp, layer.fc2));
  }
  Tensor last = b.layer_norm(x, final_norm_, config_.layer_norm_eps);

  // Pooled: each window's state at its first end-of-text token (transformers' eos_token_id rule).
  const std::vector<float> states = b.download(last);
  std::vector<float> pooled;
  for (int w = 0; w < windows; ++w) {
    const auto window = ids.subspan(static_cast<std::size_t>(w) * tokens, tokens);
    const auto eos = std::ranges::find(window, config_.eos_token);
    const std::size_t at = static_cast<std::size_t>(w) * tokens + (eos == window.end() ? tokens - 1 : eos - window.begin());
    pooled.insert(pooled.end(), states.begin() + at * hidden, states.begin() + (at + 1) * hidden);
  }
  Tensor pooled_tensor = b.upload(pooled, {windows, hidden});
  if (projection_) pooled_tensor = b.linear(pooled_tensor, *projection_);
  return {last, penultimate, pooled_tensor};
}

}  // namespace rf::stable_diffusion
