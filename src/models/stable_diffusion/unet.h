#pragma once
// diffusers' UNet2DConditionModel as Stable Diffusion 1.x, 2.x and XL use it: the time embedding
// (plus SDXL's pooled-text and size/crop embedding), down blocks of ResNets and spatial
// transformers with their skip connections, the mid block, up blocks that take the skips back,
// and the output convolution.
#include <optional>
#include <span>
#include <vector>

#include "backend/image_backend.h"
#include "models/stable_diffusion/blocks.h"
#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

// What the UNet is conditioned on besides the timestep.
struct UnetConditioning {
  Tensor context;                    // [batch, tokens, cross_attention_dim]
  std::optional<Tensor> text_embeds;  // SDXL: pooled text embedding [batch, projection_dim]
  std::optional<Tensor> time_ids;     // SDXL: [batch, 6] original size, crop top-left, target size (as floats)
  // SDXL: add_embedding of the two above (Unet::added_embedding), the same at every step; made by
  // forward where absent.
  std::optional<Tensor> added;
};

class Unet {
 public:
  Unet(const TensorSet& tensors, const UnetConfig& config, ImageBackend& backend);

  // The prediction (noise or v) for `sample` [batch, in_channels, h, w] at `timestep`.
  Tensor forward(const Tensor& sample, float timestep, const UnetConditioning& conditioning) const;
  const UnetConfig& config() const { return config_; }
  // SDXL's add_embedding of the pooled text embedding and the size/crop ids: [batch, time embedding].
  Tensor added_embedding(const UnetConditioning& conditioning) const;

 private:
  struct Level {
    std::vector<ResnetBlock> resnets;
    std::vector<SpatialTransformer> attentions;  // one per ResNet, or none
    std::optional<ConvWeights> resample;         // down: stride-2 conv; up: conv after the 2x upsampling
  };

  Tensor time_embedding(int batch, float timestep, const UnetConditioning& conditioning) const;

  UnetConfig config_;
  ImageBackend& backend_;
  ConvWeights conv_in_, conv_out_;
  LinearWeights time_linear_1_, time_linear_2_;
  std::optional<LinearWeights> add_linear_1_, add_linear_2_;
  std::vector<Level> down_, up_;  // up_ in the order they run (lowest resolution first)
  ResnetBlock mid_resnet_1_, mid_resnet_2_;
  SpatialTransformer mid_attention_;
  NormWeights norm_out_;
};

}  // namespace rf::stable_diffusion
