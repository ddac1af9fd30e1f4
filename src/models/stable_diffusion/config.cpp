#include "models/stable_diffusion/config.h"

#include <initializer_list>
#include <utility>

#include "tokenizer/clip_tokenizer.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// `what` has `channels` channels, which GroupNorm splits into `groups` groups.
void check_groups(const std::string& source, const std::string& what, int channels, int groups) {
  if (channels < 1 || channels % groups != 0) {
    fail("{}: {} has {} channels, which {} norm groups do not divide", source, what, channels, groups);
  }
}

void check_heads(const std::string& source, const std::string& what, int width, int heads) {
  if (heads < 1 || width % heads != 0) {
    fail("{}: {} is {} wide, which {} attention heads do not divide", source, what, width, heads);
  }
}

// Each of the part's named counts is at least 1.
void check_counts(const std::string& source, const std::string& part,
                  std::initializer_list<std::pair<const char*, int>> counts) {
  for (const auto& [what, value] : counts) {
    if (value < 1) fail("{}: {}'s {} is {}, expected at least 1", source, part, what, value);
  }
}

void check_unet(const UnetConfig& unet, const std::string& source) {
  if (unet.levels.empty()) fail("{}: the UNet has no levels", source);
  check_counts(source, "the UNet",
               {{"norm groups", unet.norm_groups},
                {"in_channels", unet.in_channels},
                {"out_channels", unet.out_channels},
                {"layers_per_block", unet.layers_per_block},
                {"mid-block transformer depth", unet.mid_transformer_depth}});
  for (std::size_t i = 0; i < unet.levels.size(); ++i) {
    const auto& level = unet.levels[i];
    const auto what = fmt::format("the UNet's level {}", i);
    check_groups(source, what, level.channels, unet.norm_groups);
    if (!level.attention) continue;
    check_heads(source, what, level.channels, level.heads);
    check_counts(source, what, {{"transformer depth", level.transformer_depth}});
  }
  check_heads(source, "the UNet's mid block", unet.levels.back().channels, unet.mid_heads);
}

void check_vae(const VaeConfig& vae, const std::string& source) {
  if (vae.block_out_channels.empty()) fail("{}: the VAE has no levels", source);
  check_counts(source, "the VAE",
               {{"norm groups", vae.norm_groups},
                {"layers_per_block", vae.layers_per_block},
                {"latent_channels", vae.latent_channels},
                {"in_channels", vae.in_channels},
                {"out_channels", vae.out_channels}});
  for (std::size_t i = 0; i < vae.block_out_channels.size(); ++i) {
    check_groups(source, fmt::format("the VAE's level {}", i), vae.block_out_channels[i], vae.norm_groups);
  }
}

void check_text(const ClipTextConfig& text, const std::string& what, const std::string& source) {
  check_heads(source, what, text.hidden, text.heads);
  check_counts(source, what, {{"layers", text.layers}, {"intermediate size", text.intermediate}});
  if (text.max_positions < static_cast<int>(kClipContextLength)) {
    fail("{}: {} has {} positions; CLIP windows need {}", source, what, text.max_positions, kClipContextLength);
  }
  if (text.eos_token < 0 || text.eos_token >= text.vocab_size) {
    fail("{}: {}'s eos token {} is outside its vocabulary of {}", source, what, text.eos_token, text.vocab_size);
  }
}

// SDXL's add_embedding reads the pooled text embedding and six size ids of addition_time_embed_dim each.
void check_text_time(const PipelineConfig& config, const std::string& source) {
  const auto& unet = config.unet;
  const bool sdxl = config.architecture == Architecture::sdxl;
  if (sdxl != unet.text_time_embedding || sdxl != config.text_encoder_2.has_value()) {
    fail("{}: {} needs {} text_time embedding and {} second text encoder", source,
         architecture_name(config.architecture), sdxl ? "a" : "no", sdxl ? "a" : "no");
  }
  if (!sdxl) return;
  const int pooled = config.text_encoder_2->projection_dim;
  if (unet.addition_embed_input_dim != 6 * unet.addition_time_embed_dim + pooled) {
    fail("{}: the UNet's add_embedding reads {} values, but 6 size ids of {} and a pooled embedding of {} make {}",
         source, unet.addition_embed_input_dim, unet.addition_time_embed_dim, pooled,
         6 * unet.addition_time_embed_dim + pooled);
  }
}

}  // namespace

std::string architecture_name(Architecture architecture) {
  switch (architecture) {
    case Architecture::sd1:
      return "SD 1.x";
    case Architecture::sd2:
      return "SD 2.x";
    case Architecture::sdxl:
      return "SDXL";
  }
  return "?";
}

void check_config(const PipelineConfig& config, const std::string& source) {
  check_unet(config.unet, source);
  check_vae(config.vae, source);
  check_text(config.text_encoder, "the text encoder", source);
  int context = config.text_encoder.hidden;
  if (config.text_encoder_2) {
    check_text(*config.text_encoder_2, "the second text encoder", source);
    if (config.text_encoder_2->projection_dim < 1) fail("{}: the second text encoder has no text_projection", source);
    context += config.text_encoder_2->hidden;  // SDXL's context is both encoders' states side by side
  }
  if (config.unet.cross_attention_dim != context) {
    fail("{}: the UNet's cross_attention_dim is {}, but the text encoders' states are {} wide", source,
         config.unet.cross_attention_dim, context);
  }
  check_text_time(config, source);
}

}  // namespace rf::stable_diffusion
