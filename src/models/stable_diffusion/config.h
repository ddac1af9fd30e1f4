#pragma once
// What a Stable Diffusion checkpoint's parts are, as the forwards need it: diffusers' config.json
// fields (UNet2DConditionModel, AutoencoderKL, CLIPTextModel[WithProjection]) in the form the
// networks use, whether they were read from a diffusers folder or inferred from a single file's
// tensor shapes (checkpoint.h).
#include <optional>
#include <string>
#include <vector>

#include "models/stable_diffusion/schedule.h"
#include "tokenizer/clip_tokenizer.h"

namespace rf::stable_diffusion {

enum class Architecture { sd1, sd2, sdxl };

// A CLIP text transformer (CLIPTextModel; with `projection_dim`, CLIPTextModelWithProjection).
struct ClipTextConfig {
  int vocab_size = 49408;
  int hidden = 768;
  int layers = 12;
  int heads = 12;
  int intermediate = 3072;
  int max_positions = 77;
  float layer_norm_eps = 1e-5f;
  bool quick_gelu = true;   // hidden_act "quick_gelu" (OpenAI CLIP); false: exact "gelu" (OpenCLIP)
  int projection_dim = 0;   // text_projection's width; 0 when the model has none
  int eos_token = 49407;    // pooled output = the state at the first eos_token
  ClipPadding padding = ClipPadding::EndOfText;  // the tokenizer's pad token (tokenizer_config.json)

  bool operator==(const ClipTextConfig&) const = default;
};

// One resolution level of the UNet: its width, and the spatial transformers its blocks carry.
struct UnetLevel {
  int channels = 0;
  bool attention = false;     // CrossAttn{Down,Up}Block2D rather than {Down,Up}Block2D
  int transformer_depth = 1;  // transformer blocks per spatial transformer (transformer_layers_per_block)
  int heads = 1;              // attention heads; head width = channels / heads

  bool operator==(const UnetLevel&) const = default;
};

struct UnetConfig {
  int in_channels = 4;        // 9 for inpainting UNets: latents, mask, masked-image latents
  int out_channels = 4;
  std::vector<UnetLevel> levels;  // down order (highest resolution first); up blocks mirror them
  int layers_per_block = 2;       // ResNets per down block; up blocks have one more
  int mid_transformer_depth = 1;  // the mid block's spatial transformer
  int mid_heads = 1;
  int cross_attention_dim = 768;
  bool linear_projection = false;  // proj_in/proj_out as Linear (SD 2, SDXL) or 1x1 Conv (SD 1)
  bool upcast_attention = false;   // attention in fp32 even when the rest is not (SD 2.1)
  int norm_groups = 32;
  float norm_eps = 1e-5f;
  bool flip_sin_to_cos = true;
  float freq_shift = 0;
  // SDXL's addition_embed_type "text_time": the pooled text embedding and the six size/crop ids,
  // each id embedded in addition_time_embed_dim sinusoids, then a 2-layer MLP into the time
  // embedding (input width projection_class_embeddings_input_dim).
  bool text_time_embedding = false;
  int addition_time_embed_dim = 0;
  int addition_embed_input_dim = 0;
  int sample_size = 64;  // the latent size it was trained at (512 / 8 for SD 1.5)

  int time_embed_dim() const { return levels.empty() ? 0 : 4 * levels[0].channels; }
  bool operator==(const UnetConfig&) const = default;
};

struct VaeConfig {
  int in_channels = 3;
  int out_channels = 3;
  int latent_channels = 4;
  std::vector<int> block_out_channels{128, 256, 512, 512};  // encoder order; one downsample between levels
  int layers_per_block = 2;  // encoder ResNets per level; decoder levels have one more
  int norm_groups = 32;
  bool mid_attention = true;
  bool quant_conv = true;       // quant_conv / post_quant_conv present
  float scaling_factor = 0.18215f;
  float shift_factor = 0;
  bool force_upcast = false;    // the VAE overflows in fp16 (SDXL's original): run it in fp32
  int sample_size = 512;

  int downscale() const { return 1 << (static_cast<int>(block_out_channels.size()) - 1); }
  bool operator==(const VaeConfig&) const = default;
};

// The whole pipeline's description.
struct PipelineConfig {
  Architecture architecture = Architecture::sd1;
  UnetConfig unet;
  VaeConfig vae;
  ClipTextConfig text_encoder;
  std::optional<ClipTextConfig> text_encoder_2;  // SDXL's second (OpenCLIP bigG) encoder
  SchedulerConfig scheduler;
  // SDXL: an empty negative prompt is all-zero embeddings, not the encoded empty string.
  bool force_zeros_for_empty_prompt = false;

  bool operator==(const PipelineConfig&) const = default;
};

std::string architecture_name(Architecture architecture);  // "SD 1.x", "SD 2.x", "SDXL"

// Fails, naming `source`, where the parts disagree with each other or with what the forwards
// assume: widths that the heads and norm groups divide, a context as wide as the text encoders'
// states, SDXL's pooled and size embeddings as wide as its add_embedding reads.
void check_config(const PipelineConfig& config, const std::string& source);

}  // namespace rf::stable_diffusion
