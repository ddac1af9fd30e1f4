#pragma once
// transformers' CLIPTextModel (and CLIPTextModelWithProjection): token and position embeddings,
// pre-norm transformer layers with causal attention, a final LayerNorm. Stable Diffusion takes
// the last layer's normed states (SD 1.x, 2.x) or the penultimate layer's unnormed ones (SDXL), and
// SDXL the projected pooled state of its second encoder.
#include <optional>
#include <span>
#include <vector>

#include "backend/image_backend.h"
#include "models/stable_diffusion/blocks.h"
#include "models/stable_diffusion/config.h"

namespace rf::stable_diffusion {

struct ClipTextOutput {
  Tensor last_hidden_state;  // [windows, tokens, hidden], after the final LayerNorm
  Tensor penultimate;        // hidden_states[-2]: the input of the last layer, unnormed
  // The final-normed state at each window's first end-of-text token [windows, hidden]; through
  // text_projection when the model has one.
  Tensor pooled;
};

class ClipTextEncoder {
 public:
  ClipTextEncoder(const TensorSet& tensors, const ClipTextConfig& config, ImageBackend& backend);

  // `ids` holds windows of config.max_positions tokens each.
  ClipTextOutput forward(std::span<const int> ids) const;
  const ClipTextConfig& config() const { return config_; }

 private:
  struct Layer {
    NormWeights norm1, norm2;
    AttentionBlock attention;
    LinearWeights fc1, fc2;
  };

  ClipTextConfig config_;
  ImageBackend& backend_;
  WeightMatrix token_embedding_, position_embedding_;
  std::vector<Layer> layers_;
  NormWeights final_norm_;
  std::optional<LinearWeights> projection_;
};

}  // namespace rf::stable_diffusion
