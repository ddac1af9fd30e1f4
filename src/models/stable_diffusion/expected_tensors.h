#pragma once
// Every tensor the forwards read from each part of a Stable Diffusion checkpoint, as the part's
// config implies it: its diffusers/transformers name (the name the Checkpoint presents), its shape,
// and where the original single-file layout keeps it (CompVis LDM and Stability SGM for the UNet
// and VAE, transformers or OpenCLIP for the text encoders). The Checkpoint looks every one of
// them up, so a missing or misshapen tensor fails at load rather than in a forward.
#include <cstdint>
#include <string>
#include <vector>

#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

// Where a single file keeps a tensor, below the part's prefix: under `name`, as one of `parts`
// equal blocks of rows (OpenCLIP's in_proj_weight is q, k and v stacked), or transposed
// (OpenCLIP's text_projection is stored [hidden, projection]).
struct StoredAs {
  std::string name;
  int parts = 1;
  int part = 0;
  bool transposed = false;
};

struct Parameter {
  std::string name;
  std::vector<std::uint64_t> shape;  // outermost first, as the forwards read it
  StoredAs original;
};

// How a single file names a CLIP text encoder: transformers' CLIPTextModel (OpenAI CLIP in SD 1.x,
// SDXL's first encoder), or OpenCLIP's (SD 2.x, SDXL's second).
enum class ClipNaming { transformers, open_clip };

std::vector<Parameter> unet_parameters(const UnetConfig& config);
std::vector<Parameter> vae_parameters(const VaeConfig& config);
// text_projection.weight only where config.projection_dim > 0.
std::vector<Parameter> clip_parameters(const ClipTextConfig& config, ClipNaming original);

}  // namespace rf::stable_diffusion
