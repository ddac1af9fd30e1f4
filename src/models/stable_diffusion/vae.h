#pragma once
// diffusers' AutoencoderKL: the encoder (image -> the latent distribution's mean and log-variance)
// and the decoder (latents -> image), each a stack of ResNet levels around a mid block with one
// attention layer. Latents here are the VAE's own: the pipeline applies the scaling factor.
#include <optional>
#include <vector>

#include "backend/image_backend.h"
#include "models/stable_diffusion/blocks.h"
#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

// Tiled decoding and encoding, as diffusers' enable_tiling(): the input is cut into tiles that
// overlap by `overlap`, each run alone (so memory depends on the tile, not the image), and the
// outputs' overlaps blended linearly, top and left into each tile, in diffusers' order.
struct VaeTiling {
  int latent_tile = 0;    // latents a tile is wide and high; 0: the config's sample size / downscale
  double overlap = 0.25;  // diffusers' tile_overlap_factor
};

struct LatentDistribution {
  Tensor mean;    // [batch, latent_channels, h, w]
  Tensor logvar;  // clamped to [-30, 20] as diffusers does
};

class Vae {
 public:
  Vae(const TensorSet& tensors, const VaeConfig& config, ImageBackend& backend);

  // image [batch, 3, H, W] in [-1, 1] (H and W multiples of the downscale factor).
  LatentDistribution encode(const Tensor& image) const;
  // latents [batch, latent_channels, h, w] -> image [batch, 3, 8h, 8w], about [-1, 1], unclamped.
  Tensor decode(const Tensor& latents) const;
  // The same a tile at a time where the input is larger than one tile (else as above).
  LatentDistribution encode(const Tensor& image, const VaeTiling& tiling) const;
  Tensor decode(const Tensor& latents, const VaeTiling& tiling) const;
  const VaeConfig& config() const { return config_; }

 private:
  struct MidBlock {
    ResnetBlock resnet_1, resnet_2;
    std::optional<VaeAttention> attention;
    Tensor forward(ImageBackend& b, const Tensor& x) const;
  };
  struct Level {
    std::vector<ResnetBlock> resnets;
    std::optional<ConvWeights> resample;
  };
  struct Coder {
    ConvWeights conv_in, conv_out;
    std::vector<Level> levels;  // in the order they run
    MidBlock mid;
    NormWeights norm_out;
  };

  Tensor moments(const Tensor& image) const;  // the encoder's output: mean channels, then log-variance
  LatentDistribution split(const Tensor& moments) const;
  int latent_tile(const VaeTiling& tiling) const;

  Coder read_encoder(const ParameterReader& p) const;
  Coder read_decoder(const ParameterReader& p) const;
  MidBlock read_mid(const ParameterReader& p, int width) const;

  VaeConfig config_;
  ImageBackend& backend_;
  Coder encoder_, decoder_;
  std::optional<ConvWeights> quant_conv_, post_quant_conv_;
};

}  // namespace rf::stable_diffusion
