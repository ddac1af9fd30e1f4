#pragma once
// Text-to-image, image-to-image and inpainting as diffusers' StableDiffusion(XL)(Img2Img|Inpaint)
// pipelines compute them, with A1111's prompt handling: prompts in 77-token windows (longer ones
// concatenated, emphasis weights applied), classifier-free guidance with the negative prompt, the
// chosen sampler, and the VAE decode.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/image_backend.h"
#include "formats/image_file.h"
#include "models/stable_diffusion/clip_text_encoder.h"
#include "models/stable_diffusion/config.h"
#include "models/stable_diffusion/samplers.h"
#include "models/stable_diffusion/unet.h"
#include "models/stable_diffusion/vae.h"

namespace rf::stable_diffusion {

// A checkpoint's parts, as the pipeline reads them (they outlive it).
struct PipelineParts {
  const PipelineConfig& config;
  const TensorSet& unet;
  const TensorSet& vae;
  const TensorSet& text_encoder;
  const TensorSet* text_encoder_2;  // SDXL
  const ClipTokenizer& tokenizer;
};

// Images as rows of RGB float triples in [0, 1]: [batch][height][width][3].
struct Images {
  int batch = 0, width = 0, height = 0;
  std::vector<float> pixels;
};

// Image `index` of a batch in 8 bits, and an 8-bit RGB image in [0, 1].
Image to_rgb8(const Images& images, int index);
Images from_rgb8(const Image& image);

// What image-to-image and inpainting start from.
struct InitImage {
  Images image;  // one image; the output takes its size
  // Empty (image to image), or width * height values, 1 (white) to repaint, 0 to keep; binarised at
  // 0.5 as diffusers does. Inpainting UNets (9 input channels) see the kept part and the mask; with
  // other UNets the kept part is put back, noised to the current level, after every step.
  std::vector<float> mask;
  double strength = 0.75;  // in (0, 1]: the share of the steps that run; 1 starts from noise
};

struct GenerationOptions {
  std::string prompt;
  std::string negative_prompt;
  int width = 0, height = 0;  // 0: the model's native size
  int batch = 1;
  SamplerOptions sampler;
  double guidance = 7.5;  // classifier-free guidance scale; <= 1 runs the UNet on the prompt alone
  std::uint64_t seed = 0;
  Rng rng = Rng::torch_cpu;
  BatchSeeds batch_seeds = BatchSeeds::per_image;  // A1111's seed + i per image
  std::optional<InitImage> init;
  // The VAE a tile at a time (diffusers' enable_tiling) for large images, so that its memory stays
  // bounded; none: whole images.
  std::optional<VaeTiling> vae_tiling;
};

// A prompt's text conditioning: the UNet's context [1, 77 * windows, cross_attention_dim] and, for
// SDXL, the pooled embedding [1, projection_dim].
struct TextConditioning {
  std::vector<float> context;
  int tokens = 0;
  std::vector<float> pooled;
};

// The steps a run takes: all of them, or strength times as many with an init image.
int steps_run(const GenerationOptions& options);

// The options with the model's defaults filled in, checked (sizes, batch, steps, the init image and
// mask); fails naming the option at fault. Needs only the config, so that a server checks a request
// before queueing it.
GenerationOptions resolve_options(const PipelineConfig& config, GenerationOptions options);

// Where a run stands after a step.
struct StepState {
  int step = 0;   // steps done, from 1
  int steps = 0;  // steps in all
  // The UNet's latest estimate of the clean latents, [batch][channels][height][width] (the latents'
  // size), scaled as the sampler holds them: what a preview shows.
  std::span<const float> denoised;
  int batch = 0, channels = 0, height = 0, width = 0;
};

// Called after each step; returning false stops the run (generate() then throws rf::Error).
using Progress = std::function<bool(const StepState&)>;

class Pipeline {
 public:
  Pipeline(const PipelineParts& parts, ImageBackend& backend);

  GenerationOptions resolve(GenerationOptions options) const { return resolve_options(config_, std::move(options)); }
  Images generate(const GenerationOptions& options, const Progress& progress = {}) const;
  // The same from given initial noise (standard normal, [batch, 4, h, w]) and step noise.
  Images generate(const GenerationOptions& options, std::span<const float> initial_noise, NoiseSource& step_noise,
                  const Progress& progress = {}) const;

  TextConditioning encode_prompt(const std::string& prompt) const;
  // One image's latents (its distribution's mean times the scaling factor), [1][c][h/8][w/8].
  std::vector<float> encode(const Images& image) const;
  // latents / scaling factor through the VAE one image at a time (tiled where `tiling` says), as
  // images in [0, 1].
  Images decode(std::span<const float> latents, int batch, int height, int width,
                const std::optional<VaeTiling>& tiling = std::nullopt) const;
  const PipelineConfig& config() const { return config_; }

 private:
  TextConditioning encode_windows(const std::string& prompt, std::size_t windows) const;
  // What an init image brings to the run (latents [batch][c][h][w] each).
  struct ImageConditioning {
    std::vector<float> image_latents;  // the image's (scaled)
    std::vector<float> latent_mask;    // the mask at the latents' size, [batch][1][h][w]; empty without one
    std::vector<float> unet_extra;     // inpainting UNets: mask and masked-image latents, [batch][5][h][w]
  };
  ImageConditioning condition_on(const GenerationOptions& options) const;
  // The image's latents distribution's mean times the scaling factor: [1][c][h][w].
  std::vector<float> encode_image(std::span<const float> nchw, int height, int width,
                                  const std::optional<VaeTiling>& tiling) const;

  // The UNet's text (and SDXL's size) conditioning for a batch: the negative rows, then the positive.
  UnetConditioning unet_conditioning(const GenerationOptions& options, const TextConditioning& positive,
                                     const TextConditioning* negative) const;
  void denoise(Sampler& sampler, std::span<float> latents, const GenerationOptions& options,
               const TextConditioning& positive, const TextConditioning* negative, const ImageConditioning& image,
               std::span<const float> noise, NoiseSource& step_noise, const Progress& progress) const;

  // x0 from the UNet's input (variance-preserving latents at `timestep`) and its guided prediction.
  void estimate_denoised(std::span<const float> input, double timestep, std::span<const float> prediction,
                         std::span<float> denoised) const;

  PipelineConfig config_;
  ImageBackend& backend_;
  const ClipTokenizer& tokenizer_;
  ClipTextEncoder text_encoder_;
  std::optional<ClipTextEncoder> text_encoder_2_;
  Unet unet_;
  Vae vae_;
  std::vector<float> log_sigmas_;  // of the training timesteps, for estimate_denoised
};

}  // namespace rf::stable_diffusion
