#include "models/stable_diffusion/vae.h"

#include <algorithm>
#include <functional>

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
  const int factor = config_.downscale();
  if (image.rank() != 4 || image.dim(1) != config_.in_channels || image.dim(2) % factor || image.dim(3) % factor) {
    fail("the VAE encodes {}-channel images whose sides are multiples of {}", config_.in_channels, factor);
  }
  return split(moments(image));
}

Tensor Vae::moments(const Tensor& image) const {
  ImageBackend& b = backend_;
  Tensor x = b.conv2d(image, encoder_.conv_in, 1, 1);
  for (const Level& level : encoder_.levels) {
    for (const ResnetBlock& resnet : level.resnets) x = resnet.forward(b, x, nullptr);
    // diffusers' encoder downsamples with padding (0, 1, 0, 1), not 1 on every side.
    if (level.resample) x = b.conv2d(b.pad_bottom_right(x), *level.resample, 2, 0);
  }
  x = encoder_.mid.forward(b, x);
  x = b.conv2d(b.group_norm(x, encoder_.norm_out, config_.norm_groups, kVaeEps, true), encoder_.conv_out, 1, 1);
  return quant_conv_ ? b.conv2d(x, *quant_conv_, 1, 0) : x;
}

LatentDistribution Vae::split(const Tensor& x) const {
  ImageBackend& b = backend_;
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

namespace {

// A host copy of an NCHW tensor, for cutting tiles and blending them.
struct Planes {
  int n = 0, c = 0, h = 0, w = 0;
  std::vector<float> v;
  float& at(int b, int ch, int y, int x) { return v[((static_cast<std::size_t>(b) * c + ch) * h + y) * w + x]; }
  float at(int b, int ch, int y, int x) const { return v[((static_cast<std::size_t>(b) * c + ch) * h + y) * w + x]; }
  Planes crop(int y0, int x0, int height, int width) const {
    Planes out{n, c, std::min(height, h - y0), std::min(width, w - x0), {}};
    out.v.resize(static_cast<std::size_t>(n) * c * out.h * out.w);
    for (int b = 0; b < n; ++b)
      for (int ch = 0; ch < c; ++ch)
        for (int y = 0; y < out.h; ++y)
          for (int x = 0; x < out.w; ++x) out.at(b, ch, y, x) = at(b, ch, y0 + y, x0 + x);
    return out;
  }
};

// diffusers' blend_v / blend_h: the first `extent` rows (columns) of `b` fade in over `a`'s last.
void blend(const Planes& a, Planes& b, int extent, bool vertical) {
  extent = std::min({vertical ? a.h : a.w, vertical ? b.h : b.w, extent});
  for (int k = 0; k < extent; ++k) {
    const float weight = static_cast<float>(k) / extent;
    for (int n = 0; n < b.n; ++n)
      for (int ch = 0; ch < b.c; ++ch)
        for (int other = 0; other < (vertical ? b.w : b.h); ++other) {
          float& out = vertical ? b.at(n, ch, k, other) : b.at(n, ch, other, k);
          const float from = vertical ? a.at(n, ch, a.h - extent + k, other) : a.at(n, ch, other, a.w - extent + k);
          out = from * (1 - weight) + out * weight;
        }
  }
}

// Runs `fn` on tiles of `tile` pixels every `stride`, blends each output into its neighbours over
// `extent` and keeps its first `limit` rows and columns: diffusers' tiled_decode / _tiled_encode.
Planes run_tiled(const Planes& in, int tile, int stride, int extent, int limit,
                 const std::function<Planes(const Planes&)>& fn) {
  std::vector<std::vector<Planes>> rows;
  for (int i = 0; i < in.h; i += stride) {
    auto& row = rows.emplace_back();
    for (int j = 0; j < in.w; j += stride) row.push_back(fn(in.crop(i, j, tile, tile)));
  }
  Planes out;
  std::vector<std::vector<Planes>> kept(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      Planes& t = rows[i][j];  // blended in place: later tiles blend with the blended ones, as in diffusers
      if (i > 0) blend(rows[i - 1][j], t, extent, true);
      if (j > 0) blend(rows[i][j - 1], t, extent, false);
      kept[i].push_back(t.crop(0, 0, limit, limit));
    }
  out.n = in.n;
  out.c = kept[0][0].c;
  for (const auto& t : kept) out.h += t[0].h;
  for (const auto& t : kept[0]) out.w += t.w;
  out.v.resize(static_cast<std::size_t>(out.n) * out.c * out.h * out.w);
  for (int y0 = 0; const auto& row : kept) {
    for (int x0 = 0; const Planes& t : row) {
      for (int b = 0; b < t.n; ++b)
        for (int ch = 0; ch < t.c; ++ch)
          for (int y = 0; y < t.h; ++y)
            for (int x = 0; x < t.w; ++x) out.at(b, ch, y0 + y, x0 + x) = t.at(b, ch, y, x);
      x0 += t.w;
    }
    y0 += row[0].h;
  }
  return out;
}

}  // namespace

int Vae::latent_tile(const VaeTiling& tiling) const {
  const int tile = tiling.latent_tile > 0 ? tiling.latent_tile : config_.sample_size / config_.downscale();
  if (tile < 1 || !(tiling.overlap >= 0 && tiling.overlap < 1)) fail("VAE tiles of {} latents, overlap {}", tile, tiling.overlap);
  return tile;
}

Tensor Vae::decode(const Tensor& latents, const VaeTiling& tiling) const {
  ImageBackend& b = backend_;
  const int tile = latent_tile(tiling), factor = config_.downscale();
  if (latents.dim(2) <= tile && latents.dim(3) <= tile) return decode(latents);
  const int sample_tile = tile * factor, extent = static_cast<int>(sample_tile * tiling.overlap);
  const Planes in{latents.dim(0), latents.dim(1), latents.dim(2), latents.dim(3), b.download(latents)};
  const Planes out = run_tiled(in, tile, static_cast<int>(tile * (1 - tiling.overlap)), extent, sample_tile - extent,
                               [&](const Planes& t) {
                                 const Tensor image = decode(b.upload(t.v, {t.n, t.c, t.h, t.w}));
                                 return Planes{image.dim(0), image.dim(1), image.dim(2), image.dim(3), b.download(image)};
                               });
  return b.upload(out.v, {out.n, out.c, out.h, out.w});
}

LatentDistribution Vae::encode(const Tensor& image, const VaeTiling& tiling) const {
  ImageBackend& b = backend_;
  const int tile = latent_tile(tiling), sample_tile = tile * config_.downscale();
  if (image.dim(2) <= sample_tile && image.dim(3) <= sample_tile) return encode(image);
  const int extent = static_cast<int>(tile * tiling.overlap);
  const Planes in{image.dim(0), image.dim(1), image.dim(2), image.dim(3), b.download(image)};
  const Planes out = run_tiled(in, sample_tile, static_cast<int>(sample_tile * (1 - tiling.overlap)), extent,
                               tile - extent, [&](const Planes& t) {
                                 const Tensor m = moments(b.upload(t.v, {t.n, t.c, t.h, t.w}));
                                 return Planes{m.dim(0), m.dim(1), m.dim(2), m.dim(3), b.download(m)};
                               });
  return split(b.upload(out.v, {out.n, out.c, out.h, out.w}));
}

}  // namespace rf::stable_diffusion
