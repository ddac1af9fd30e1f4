#include "models/stable_diffusion/vae.h"

#include <algorithm>

#include "util/error.h"

namespace rf::stable_diffusion {

namespace {
// AutoencoderKL builds its ResNets and norms with eps 1e-6.
constexpr float kVaeEps = 1e-6f;
}  // namespace

Vae::Vae(const TensorSet& tensors, const VaeConfig& config, ImageBackend& backend) : config_(config), backend_(backend) {
  const ParameterReader p(tensors, backend, {}, config.force_upcast);
  encoder_ = read_encoder(p["encoder"]);
  decoder_ = read_decoder(p["decoder"]);
  const int moments = 2 * config.latent_channels;
  if (config.quant_conv) {
    quant_conv_ = p.conv("quant_conv", moments, moments, 1);
    post_quant_conv_ = p.conv("post_quant_conv", config.latent_channels, config.latent_channels, 1);
  }
}

Vae::MidBlock Vae::read_mid(const ParameterReader& p, int width) const {
  MidBlock mid{ResnetBlock::read(p["resnets"][0], width, width, 0, config_.norm_groups, kVaeEps),
               ResnetBlock::read(p["resnets"][1], width, width, 0, config_.norm_groups, kVaeEps), std::nullopt};
  if (config_.mid_attention) mid.attention = VaeAttention::read(p["attentions"][0], width, config_.norm_groups);
  return mid;
}

Vae::Coder Vae::read_encoder(const ParameterReader& p) const {
  const std::vector<int>& widths = config_.block_out_channels;
  Coder e;
  e.conv_in = p.conv("conv_in", config_.in_channels, widths[0], 3);
  int width = widths[0];
  for (std::size_t i = 0; i < widths.size(); ++i) {
    Level& level = e.levels.emplace_back();
    for (int j = 0; j < config_.layers_per_block; ++j) {
      level.resnets.push_back(ResnetBlock::read(p["down_blocks"][i]["resnets"][j], width, widths[i], 0,
                                                config_.norm_groups, kVaeEps));
      width = widths[i];
    }
    if (i + 1 < widths.size()) level.resample = p["down_blocks"][i]["downsamplers"][0].conv("conv", width, width, 3);
  }
  e.mid = read_mid(p["mid_block"], width);
  e.norm_out = p.norm("conv_norm_out", width);
  e.conv_out = p.conv("conv_out", width, 2 * config_.latent_channels, 3);
  return e;
}

Vae::Coder Vae::read_decoder(const ParameterReader& p) const {
  std::vector<int> widths = config_.block_out_channels;
  std::ranges::reverse(widths);
  Coder d;
  int width = widths[0];
  d.conv_in = p.conv("conv_in", config_.latent_channels, width, 3);
  d.mid = read_mid(p["mid_block"], width);
  for (std::size_t i = 0; i < widths.size(); ++i) {
    Level& level = d.levels.emplace_back();
    for (int j = 0; j <= config_.layers_per_block; ++j) {
      level.resnets.push_back(ResnetBlock::read(p["up_blocks"][i]["resnets"][j], width, widths[i], 0,
                                                config_.norm_groups, kVaeEps));
      width = widths[i];
    }
    if (i + 1 < widths.size()) level.resample = p["up_blocks"][i]["upsamplers"][0].conv("conv", width, width, 3);
  }
  d.norm_out = p.norm("conv_norm_out", width);
  d.conv_out = p.conv("conv_out", width, config_.out_channels, 3);
  return d;
}

Tensor Vae::MidBlock::forward(ImageBackend& b, const Tensor& x) const {
  Tensor h = resnet_1.forward(b, x, nullptr);
  if (attention) h = attention->forward(b, h);
  return resnet_2.forward(b, h, nullptr);
}

LatentDistribution Vae::encode(const Tensor& image) const {
  ImageBackend& b = backend_;
  const int factor = config_.downscale();
  if (image.rank() != 4 || image.dim(1) != config_.in_channels || image.dim(2) % factor || image.dim(3) % factor) {
    fail("the VAE encodes {}-channel images whose sides are multiples of {}", config_.in_channels, factor);
  }
  Tensor x = b.conv2d(image, encoder_.conv_in, 1, 1);
  for (const Level& level : encoder_.levels) {
    for (const ResnetBlock& resnet : level.resnets) x = resnet.forward(b, x, nullptr);
    // diffusers' encoder downsamples with padding (0, 1, 0, 1), not 1 on every side.
    if (level.resample) x = b.conv2d(b.pad_bottom_right(x), *level.resample, 2, 0);
  }
  x = encoder_.mid.forward(b, x);
  x = b.conv2d(b.group_norm(x, encoder_.norm_out, config_.norm_groups, kVaeEps, true), encoder_.conv_out, 1, 1);
  if (quant_conv_) x = b.conv2d(x, *quant_conv_, 1, 0);

  // The moments are the mean's channels, then the log-variance's.
  const std::vector<float> moments = b.download(x);
  const int n = x.dim(0), c = config_.latent_channels;
  const std::size_t half = moments.size() / (2 * n);
  std::vector<float> mean, logvar;
  for (int i = 0; i < n; ++i) {
    const auto first = moments.begin() + 2 * i * half;
    mean.insert(mean.end(), first, first + half);
    logvar.insert(logvar.end(), first + half, first + 2 * half);
  }
  for (float& v : logvar) v = std::clamp(v, -30.0f, 20.0f);
  const std::vector<int> dims{n, c, x.dim(2), x.dim(3)};
  return {b.upload(mean, dims), b.upload(logvar, dims)};
}

Tensor Vae::decode(const Tensor& latents) const {
  ImageBackend& b = backend_;
  if (latents.rank() != 4 || latents.dim(1) != config_.latent_channels) {
    fail("the VAE decodes {}-channel latents", config_.latent_channels);
  }
  Tensor x = post_quant_conv_ ? b.conv2d(latents, *post_quant_conv_, 1, 0) : latents;
  x = decoder_.mid.forward(b, b.conv2d(x, decoder_.conv_in, 1, 1));
  for (const Level& level : decoder_.levels) {
    for (const ResnetBlock& resnet : level.resnets) x = resnet.forward(b, x, nullptr);
    if (level.resample) x = b.conv2d(b.resize_nearest(x, 2 * x.dim(2), 2 * x.dim(3)), *level.resample, 1, 1);
  }
  return b.conv2d(b.group_norm(x, decoder_.norm_out, config_.norm_groups, kVaeEps, true), decoder_.conv_out, 1, 1);
}

}  // namespace rf::stable_diffusion
