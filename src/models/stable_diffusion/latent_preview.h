#pragma once
// A cheap look at a run in progress: each latent pixel's colour as an affine map of its channels,
// rgb = M [z; 1], fitted by least squares to the model's own VAE when the preview is made (a chart
// of colour patches is encoded and each patch's latents matched to its colour). One small VAE
// encode at start-up, then a few multiply-adds a latent pixel: an image at the latents' size (an
// eighth of the output's side) that shows the composition and colours, not the detail.
#include <span>
#include <vector>

#include "models/stable_diffusion/pipeline.h"

namespace rf::stable_diffusion {

class LatentPreview {
 public:
  explicit LatentPreview(const Pipeline& pipeline);

  // Latents [batch][channels][height][width] (scaled as the sampler holds them) as images in [0, 1]
  // of width x height.
  Images render(std::span<const float> latents, int batch, int height, int width) const;
  // M: 3 rows of channels + 1 values (the last the offset).
  const std::vector<float>& map() const { return map_; }

 private:
  int channels_;
  std::vector<float> map_;
};

}  // namespace rf::stable_diffusion
