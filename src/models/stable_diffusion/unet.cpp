#include "models/stable_diffusion/unet.h"

#include "util/error.h"

namespace rf::stable_diffusion {

Unet::Unet(const TensorSet& tensors, const UnetConfig& c, ImageBackend& backend) : config_(c), backend_(backend) {
  const ParameterReader p(tensors, backend);
  const int levels = static_cast<int>(c.levels.size());
  const int time_dim = c.time_embed_dim(), groups = c.norm_groups;
  const float eps = c.norm_eps;
  const auto transformer = [&](const ParameterReader& at, const UnetLevel& level, int depth) {
    return SpatialTransformer::read(at, level.channels, level.heads, depth, c.cross_attention_dim, c.linear_projection,
                                    groups);
  };
  conv_in_ = p.conv("conv_in", c.in_channels, c.levels[0].channels, 3);
  time_linear_1_ = p["time_embedding"].linear("linear_1", c.levels[0].channels, time_dim);
  time_linear_2_ = p["time_embedding"].linear("linear_2", time_dim, time_dim);
  if (c.text_time_embedding) {
    add_linear_1_ = p["add_embedding"].linear("linear_1", c.addition_embed_input_dim, time_dim);
    add_linear_2_ = p["add_embedding"].linear("linear_2", time_dim, time_dim);
  }

  std::vector<int> skip_widths{c.levels[0].channels};
  int width = c.levels[0].channels;
  for (int i = 0; i < levels; ++i) {
    const UnetLevel& level = c.levels[i];
    const ParameterReader block = p["down_blocks"][i];
    Level& down = down_.emplace_back();
    for (int j = 0; j < c.layers_per_block; ++j) {
      down.resnets.push_back(ResnetBlock::read(block["resnets"][j], width, level.channels, time_dim, groups, eps));
      width = level.channels;
      if (level.attention) down.attentions.push_back(transformer(block["attentions"][j], level, level.transformer_depth));
      skip_widths.push_back(width);
    }
    if (i + 1 < levels) {
      down.resample = block["downsamplers"][0].conv("conv", width, width, 3);
      skip_widths.push_back(width);
    }
  }

  const ParameterReader mid = p["mid_block"];
  UnetLevel mid_level = c.levels.back();
  mid_level.heads = c.mid_heads;
  mid_resnet_1_ = ResnetBlock::read(mid["resnets"][0], width, width, time_dim, groups, eps);
  mid_attention_ = transformer(mid["attentions"][0], mid_level, c.mid_transformer_depth);
  mid_resnet_2_ = ResnetBlock::read(mid["resnets"][1], width, width, time_dim, groups, eps);

  for (int i = 0; i < levels; ++i) {
    const UnetLevel& level = c.levels[levels - 1 - i];
    const ParameterReader block = p["up_blocks"][i];
    Level& up = up_.emplace_back();
    for (int j = 0; j <= c.layers_per_block; ++j) {
      const int skip = skip_widths.back();
      skip_widths.pop_back();
      up.resnets.push_back(ResnetBlock::read(block["resnets"][j], width + skip, level.channels, time_dim, groups, eps));
      width = level.channels;
      if (level.attention) up.attentions.push_back(transformer(block["attentions"][j], level, level.transformer_depth));
    }
    if (i + 1 < levels) up.resample = block["upsamplers"][0].conv("conv", width, width, 3);
  }
  norm_out_ = p.norm("conv_norm_out", width);
  conv_out_ = p.conv("conv_out", width, c.out_channels, 3);
}

Tensor Unet::time_embedding(int batch, float timestep, const UnetConditioning& cond) const {
  ImageBackend& b = backend_;
  const std::vector<float> timesteps(batch, timestep);
  const Tensor sinusoids = b.timestep_embedding(timesteps, config_.levels[0].channels, config_.flip_sin_to_cos,
                                                config_.freq_shift);
  const Tensor emb = b.linear(b.activation(b.linear(sinusoids, time_linear_1_), Activation::silu), time_linear_2_);
  if (!config_.text_time_embedding) return emb;
  return b.add(emb, cond.added ? *cond.added : added_embedding(cond));
}

Tensor Unet::added_embedding(const UnetConditioning& cond) const {
  ImageBackend& b = backend_;
  if (!config_.text_time_embedding) fail("this UNet has no add_embedding (only SDXL's text_time has)");
  if (!cond.text_embeds || !cond.time_ids) fail("this UNet (SDXL) needs the pooled text embedding and the time ids");
  // Each of the six ids gets its own sinusoids, laid side by side after the pooled text embedding.
  const int batch = cond.text_embeds->dim(0);
  const std::vector<float> ids = b.download(*cond.time_ids);
  const Tensor id_sinusoids = b.timestep_embedding(ids, config_.addition_time_embed_dim, config_.flip_sin_to_cos,
                                                   config_.freq_shift);
  const int id_width = static_cast<int>(ids.size() / batch) * config_.addition_time_embed_dim;
  const std::vector<float> text = b.download(*cond.text_embeds), id_values = b.download(id_sinusoids);
  const int text_width = cond.text_embeds->dim(1);
  std::vector<float> added;
  for (int n = 0; n < batch; ++n) {
    added.insert(added.end(), text.begin() + n * text_width, text.begin() + (n + 1) * text_width);
    added.insert(added.end(), id_values.begin() + n * id_width, id_values.begin() + (n + 1) * id_width);
  }
  const Tensor add_input = b.upload(added, {batch, text_width + id_width});
  return b.linear(b.activation(b.linear(add_input, *add_linear_1_), Activation::silu), *add_linear_2_);
}

Tensor Unet::forward(const Tensor& sample, float timestep, const UnetConditioning& cond) const {
  ImageBackend& b = backend_;
  if (sample.rank() != 4 || sample.dim(1) != config_.in_channels) {
    fail("the UNet takes {} latent channels", config_.in_channels);
  }
  const Tensor time = b.activation(time_embedding(sample.dim(0), timestep, cond), Activation::silu);
  const auto run_level = [&](const Level& level, std::size_t j, Tensor x) {
    x = level.resnets[j].forward(b, x, &time);
    return level.attentions.empty() ? x : level.attentions[j].forward(b, x, cond.context);
  };

  Tensor x = b.conv2d(sample, conv_in_, 1, 1);
  std::vector<Tensor> skips{x};
  for (const Level& down : down_) {
    for (std::size_t j = 0; j < down.resnets.size(); ++j) skips.push_back(x = run_level(down, j, x));
    if (down.resample) skips.push_back(x = b.conv2d(x, *down.resample, 2, 1));
  }
  x = mid_resnet_2_.forward(b, mid_attention_.forward(b, mid_resnet_1_.forward(b, x, &time), cond.context), &time);
  for (const Level& up : up_) {
    for (std::size_t j = 0; j < up.resnets.size(); ++j) {
      x = run_level(up, j, b.concat_channels(x, skips.back()));
      skips.pop_back();
    }
    // Upsampled to the size of the skip it meets next, which an odd size halved made smaller than 2x.
    if (up.resample) x = b.conv2d(b.resize_nearest(x, skips.back().dim(2), skips.back().dim(3)), *up.resample, 1, 1);
  }
  return b.conv2d(b.group_norm(x, norm_out_, config_.norm_groups, config_.norm_eps, true), conv_out_, 1, 1);
}

}  // namespace rf::stable_diffusion
