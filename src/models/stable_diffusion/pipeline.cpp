#include "models/stable_diffusion/pipeline.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/stable_diffusion/prompt_weights.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// A1111's emphasis: each token's state times its weight, then the whole window rescaled so that its
// mean is what it was (so weights move the prompt's balance, not its overall magnitude).
void apply_weights(std::span<float> window, std::span<const float> weights, int width) {
  const double before = std::accumulate(window.begin(), window.end(), 0.0) / window.size();
  for (std::size_t t = 0; t < weights.size(); ++t)
    for (int i = 0; i < width; ++i) window[t * width + i] *= weights[t];
  const double after = std::accumulate(window.begin(), window.end(), 0.0) / window.size();
  if (after == 0) return;  // nothing to restore the mean from (A1111 would divide by zero)
  const float rescale = static_cast<float>(before / after);
  for (float& v : window) v *= rescale;
}

// [rows, a_width] and [rows, b_width] side by side: [rows, a_width + b_width].
std::vector<float> concat_features(std::span<const float> a, int a_width, std::span<const float> b, int b_width) {
  const std::size_t rows = a.size() / a_width;
  std::vector<float> out;
  out.reserve(a.size() + b.size());
  for (std::size_t r = 0; r < rows; ++r) {
    out.insert(out.end(), a.begin() + r * a_width, a.begin() + (r + 1) * a_width);
    out.insert(out.end(), b.begin() + r * b_width, b.begin() + (r + 1) * b_width);
  }
  return out;
}

// `times` copies of `rows` one after the other.
std::vector<float> repeat(std::span<const float> rows, int times) {
  std::vector<float> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), rows.begin(), rows.end());
  return out;
}

// One image's RGB rows (triples in [0, 1]) as the VAE takes images: NCHW in [-1, 1].
std::vector<float> vae_input(std::span<const float> rgb) {
  const std::size_t pixels = rgb.size() / 3;
  std::vector<float> image(rgb.size());
  for (std::size_t p = 0; p < pixels; ++p)
    for (int ch = 0; ch < 3; ++ch) image[ch * pixels + p] = 2 * rgb[p * 3 + ch] - 1;
  return image;
}

}  // namespace

Image to_rgb8(const Images& images, int index) {
  const std::size_t n = static_cast<std::size_t>(images.width) * images.height * 3;
  Image image{images.width, images.height, 3, std::vector<std::uint8_t>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    image.pixels[i] = static_cast<std::uint8_t>(std::clamp(images.pixels[index * n + i], 0.0f, 1.0f) * 255.0f + 0.5f);
  }
  return image;
}

Images from_rgb8(const Image& image) {
  if (image.channels != 3) fail("an image of {} channels where RGB was expected", image.channels);
  Images out{1, image.width, image.height, std::vector<float>(image.pixels.size())};
  std::ranges::transform(image.pixels, out.pixels.begin(), [](std::uint8_t v) { return v / 255.0f; });
  return out;
}

int steps_run(const GenerationOptions& o) {
  if (!o.init) return o.sampler.steps;
  return std::min(static_cast<int>(o.sampler.steps * o.init->strength), o.sampler.steps);  // diffusers' rounding
}

Pipeline::Pipeline(const PipelineParts& parts, ImageBackend& backend)
    : config_(parts.config),
      backend_(backend),
      tokenizer_(parts.tokenizer),
      text_encoder_(parts.text_encoder, parts.config.text_encoder, backend),
      unet_(parts.unet, parts.config.unet, backend),
      vae_(parts.vae, parts.config.vae, backend),
      log_sigmas_(training_log_sigmas(parts.config.scheduler)) {
  if (config_.text_encoder_2) {
    if (!parts.text_encoder_2) fail("this pipeline needs its second text encoder");
    text_encoder_2_.emplace(*parts.text_encoder_2, *config_.text_encoder_2, backend);
  }
}

GenerationOptions resolve_options(const PipelineConfig& config, GenerationOptions o) {
  const int factor = config.vae.downscale();
  const int native = config.unet.sample_size * factor;
  if (o.init) {
    const Images& image = o.init->image;
    if (image.batch != 1 || image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * 3) {
      fail("the init image must be one RGB image");
    }
    if ((o.width && o.width != image.width) || (o.height && o.height != image.height)) {
      fail("size {}x{} differs from the init image's {}x{}: the output takes the image's size", o.width, o.height,
           image.width, image.height);
    }
    o.width = image.width;
    o.height = image.height;
    if (!(o.init->strength > 0 && o.init->strength <= 1)) fail("strength {} must be in (0, 1]", o.init->strength);
    const std::size_t pixels = static_cast<std::size_t>(image.width) * image.height;
    if (!o.init->mask.empty() && o.init->mask.size() != pixels) {
      fail("the mask has {} pixels where the {}x{} image has {}", o.init->mask.size(), image.width, image.height, pixels);
    }
  }
  if (o.width == 0) o.width = native;
  if (o.height == 0) o.height = native;
  if (o.width < factor || o.width % factor) fail("width {} is not a positive multiple of {}", o.width, factor);
  if (o.height < factor || o.height % factor) fail("height {} is not a positive multiple of {}", o.height, factor);
  if (o.batch < 1) fail("batch {} must be at least 1", o.batch);
  if (o.sampler.steps < 1) fail("steps {} must be at least 1", o.sampler.steps);
  if (!(o.guidance >= 0)) fail("guidance scale {} must be at least 0", o.guidance);
  const bool inpainting_unet = config.unet.in_channels != config.vae.latent_channels;
  if (inpainting_unet && (!o.init || o.init->mask.empty())) {
    fail("this is an inpainting model ({} input channels): it needs an init image and a mask", config.unet.in_channels);
  }
  if (inpainting_unet && config.unet.in_channels != 2 * config.vae.latent_channels + 1) {
    fail("a UNet of {} input channels takes neither latents nor latents, mask and masked-image latents",
         config.unet.in_channels);
  }
  if (o.init && steps_run(o) == 0) {
    fail("strength {} runs none of the {} steps: raise it or the steps", o.init->strength, o.sampler.steps);
  }
  return o;
}

TextConditioning Pipeline::encode_windows(const std::string& prompt, std::size_t min_windows) const {
  const std::vector<PromptRun> runs = parse_prompt_weights(prompt);
  // Each encoder's states, weighted: SD 1.x/2.x take the last layer after the final norm, SDXL the
  // penultimate layer of both encoders side by side.
  const bool penultimate = text_encoder_2_.has_value();
  const auto encode = [&](const ClipTextEncoder& encoder, std::vector<float>* pooled) {
    WeightedWindows windows = tokenize_weighted(tokenizer_, runs, {encoder.config().padding});
    std::vector<int> ids;
    for (const ClipWindow& window : windows.clip.windows) ids.insert(ids.end(), window.begin(), window.end());
    // Short prompts are padded with windows of the empty prompt, as A1111 evens out cond and uncond.
    const WeightedWindows empty = tokenize_weighted(tokenizer_, parse_prompt_weights(""), {encoder.config().padding});
    while (windows.weights.size() < min_windows) {
      ids.insert(ids.end(), empty.clip.windows[0].begin(), empty.clip.windows[0].end());
      windows.weights.push_back(empty.weights[0]);
    }
    const ClipTextOutput out = encoder.forward(ids);
    std::vector<float> states = backend_.download(penultimate ? out.penultimate : out.last_hidden_state);
    const int width = encoder.config().hidden;
    for (std::size_t w = 0; w < windows.weights.size(); ++w) {
      apply_weights(std::span(states).subspan(w * kClipContextLength * width, kClipContextLength * width),
                    windows.weights[w], width);
    }
    if (pooled) {
      const std::vector<float> all = backend_.download(out.pooled);
      pooled->assign(all.begin(), all.begin() + out.pooled.dim(1));  // the first window's, as A1111
    }
    return states;
  };
  TextConditioning c;
  c.context = encode(text_encoder_, nullptr);
  if (text_encoder_2_) {
    const std::vector<float> second = encode(*text_encoder_2_, &c.pooled);
    c.context = concat_features(c.context, config_.text_encoder.hidden, second, text_encoder_2_->config().hidden);
  }
  c.tokens = static_cast<int>(c.context.size() / config_.unet.cross_attention_dim);
  return c;
}

TextConditioning Pipeline::encode_prompt(const std::string& prompt) const { return encode_windows(prompt, 1); }

std::vector<float> Pipeline::encode_image(std::span<const float> nchw, int height, int width,
                                          const std::optional<VaeTiling>& tiling) const {
  const VaeConfig& vae = config_.vae;
  const Tensor image = backend_.upload(nchw, {1, 3, height, width});
  std::vector<float> mean = backend_.download((tiling ? vae_.encode(image, *tiling) : vae_.encode(image)).mean);
  for (float& v : mean) v = (v - vae.shift_factor) * vae.scaling_factor;
  return mean;
}

std::vector<float> Pipeline::encode(const Images& image) const {
  const int factor = config_.vae.downscale();
  if (image.batch != 1 || image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * 3) {
    fail("the VAE encodes one RGB image at a time");
  }
  if (image.width % factor || image.height % factor) {
    fail("a {}x{} image cannot be encoded: its sides must be multiples of {}", image.width, image.height, factor);
  }
  return encode_image(vae_input(image.pixels), image.height, image.width, std::nullopt);
}

Pipeline::ImageConditioning Pipeline::condition_on(const GenerationOptions& o) const {
  ImageConditioning c;
  if (!o.init) return c;
  const InitImage& init = *o.init;
  const int height = o.height, width = o.width, factor = config_.vae.downscale();
  const std::size_t pixels = static_cast<std::size_t>(width) * height;
  std::vector<float> image = vae_input(init.image.pixels);
  const bool inpainting_unet = config_.unet.in_channels != config_.vae.latent_channels;
  // The image's own latents start image to image, and keep the unmasked part with other UNets.
  if (init.strength < 1 || !inpainting_unet) {
    c.image_latents = repeat(encode_image(image, height, width, o.vae_tiling), o.batch);
  }
  if (init.mask.empty()) return c;

  std::vector<float> mask(pixels);
  for (std::size_t p = 0; p < pixels; ++p) mask[p] = init.mask[p] >= 0.5f ? 1.0f : 0.0f;
  const Tensor small = backend_.resize_nearest(backend_.upload(mask, {1, 1, height, width}), height / factor,
                                               width / factor);
  const std::vector<float> latent_mask = backend_.download(small);
  c.latent_mask = repeat(latent_mask, o.batch);
  if (inpainting_unet) {
    for (int ch = 0; ch < 3; ++ch)
      for (std::size_t p = 0; p < pixels; ++p) image[ch * pixels + p] *= 1 - mask[p];
    std::vector<float> extra = latent_mask;
    const std::vector<float> masked = encode_image(image, height, width, o.vae_tiling);
    extra.insert(extra.end(), masked.begin(), masked.end());
    c.unet_extra = repeat(extra, o.batch);
  }
  return c;
}

UnetConditioning Pipeline::unet_conditioning(const GenerationOptions& o, const TextConditioning& positive,
                                             const TextConditioning* negative) const {
  ImageBackend& b = backend_;
  const int rows = negative ? 2 * o.batch : o.batch;  // with guidance: the negative rows, then the positive
  const auto stack = [&](const std::vector<float> TextConditioning::*field) {
    std::vector<float> all = negative ? repeat(negative->*field, o.batch) : std::vector<float>{};
    const std::vector<float> pos = repeat(positive.*field, o.batch);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  };
  UnetConditioning cond;
  cond.context = b.upload(stack(&TextConditioning::context), {rows, positive.tokens, config_.unet.cross_attention_dim});
  if (config_.unet.text_time_embedding) {
    cond.text_embeds = b.upload(stack(&TextConditioning::pooled), {rows, static_cast<int>(positive.pooled.size())});
    // SDXL's size and crop conditioning: original size, crop top-left, target size.
    const std::vector<float> ids{static_cast<float>(o.height), static_cast<float>(o.width), 0, 0,
                                 static_cast<float>(o.height), static_cast<float>(o.width)};
    cond.time_ids = b.upload(repeat(ids, rows), {rows, 6});
    cond.added = unet_.added_embedding(cond);  // once, not at every step (it downloads and waits)
  }
  return cond;
}

void Pipeline::denoise(Sampler& sampler, std::span<float> latents, const GenerationOptions& o,
                       const TextConditioning& positive, const TextConditioning* negative,
                       const ImageConditioning& image, std::span<const float> noise, NoiseSource& step_noise,
                       const Progress& progress) const {
  ImageBackend& b = backend_;
  const int h = o.height / config_.vae.downscale(), w = o.width / config_.vae.downscale();
  const int rows = negative ? 2 * o.batch : o.batch;
  const UnetConditioning cond = unet_conditioning(o, positive, negative);
  const std::size_t plane = static_cast<std::size_t>(h) * w, latent = config_.vae.latent_channels * plane;
  // Inpainting UNets take each image's mask and masked-image latents after its latents.
  const auto unet_input = [&](std::span<const float> input) {
    if (image.unet_extra.empty()) return std::vector<float>(input.begin(), input.end());
    const std::size_t extra = image.unet_extra.size() / o.batch;
    std::vector<float> all;
    for (int n = 0; n < o.batch; ++n) {
      all.insert(all.end(), input.begin() + n * latent, input.begin() + (n + 1) * latent);
      all.insert(all.end(), image.unet_extra.begin() + n * extra, image.unet_extra.begin() + (n + 1) * extra);
    }
    return all;
  };
  std::vector<float> denoised(latents.size());
  const Model model = [&](std::span<const float> input, double timestep, std::span<float> output) {
    const std::vector<float> one = unet_input(input);
    const Tensor x = b.upload(negative ? repeat(one, 2) : one, {rows, config_.unet.in_channels, h, w});
    const std::vector<float> prediction = b.download(unet_.forward(x, static_cast<float>(timestep), cond));
    if (!negative) {
      std::ranges::copy(prediction, output.begin());
    } else {
      const std::size_t half = prediction.size() / 2;
      for (std::size_t i = 0; i < half; ++i) {
        output[i] = prediction[i] + static_cast<float>(o.guidance) * (prediction[half + i] - prediction[i]);
      }
    }
    if (progress) estimate_denoised(input, timestep, output, denoised);
  };
  // Other UNets inpaint by putting the kept part back after each step, noised to the next level.
  const bool keep_unmasked = !image.latent_mask.empty() && image.unet_extra.empty();
  std::vector<float> kept(keep_unmasked ? latents.size() : 0);
  for (int i = 0; i < sampler.steps(); ++i) {
    sampler.step(i, latents, model, step_noise);
    if (keep_unmasked) {
      sampler.add_noise(image.image_latents, noise, sampler.schedule()[i].next_sigma, kept);
      for (std::size_t k = 0; k < latents.size(); ++k) {
        const float m = image.latent_mask[k / latent * plane + k % plane];
        latents[k] = (1 - m) * kept[k] + m * latents[k];
      }
    }
    const StepState state{i + 1, sampler.steps(), denoised, o.batch, config_.vae.latent_channels, h, w};
    if (progress && !progress(state)) fail("generation cancelled");
  }
}

void Pipeline::estimate_denoised(std::span<const float> input, double timestep, std::span<const float> prediction,
                                 std::span<float> denoised) const {
  const double sigma = timestep_to_sigma(timestep, log_sigmas_);
  const auto alpha = static_cast<float>(1 / std::sqrt(sigma * sigma + 1)), sigma_vp = static_cast<float>(sigma) * alpha;
  const bool v = config_.scheduler.prediction == Prediction::v;
  for (std::size_t i = 0; i < denoised.size(); ++i) {
    denoised[i] = v ? alpha * input[i] - sigma_vp * prediction[i] : (input[i] - sigma_vp * prediction[i]) / alpha;
  }
}

Images Pipeline::generate(const GenerationOptions& options, const Progress& progress) const {
  const GenerationOptions o = resolve(options);
  const std::size_t size = static_cast<std::size_t>(o.batch) * config_.vae.latent_channels *
                           (o.height / config_.vae.downscale()) * (o.width / config_.vae.downscale());
  const std::unique_ptr<NoiseSource> generator = make_batch_noise(o.rng, o.seed, o.batch, o.batch_seeds);
  std::vector<float> noise(size);
  generator->randn(noise);
  return generate(o, noise, *generator, progress);
}

Images Pipeline::generate(const GenerationOptions& options, std::span<const float> initial_noise,
                          NoiseSource& step_noise, const Progress& progress) const {
  const GenerationOptions o = resolve(options);
  const int h = o.height / config_.vae.downscale(), w = o.width / config_.vae.downscale();
  if (initial_noise.size() != static_cast<std::size_t>(o.batch) * config_.vae.latent_channels * h * w) {
    fail("initial noise of {} values for {} latents of {}x{}", initial_noise.size(), o.batch, w, h);
  }
  TextConditioning positive = encode_prompt(o.prompt);
  std::optional<TextConditioning> negative;
  if (o.guidance > 1.0) {
    // The UNet takes both in one batch: the one of fewer windows is padded to the other's.
    const auto windows = [](const TextConditioning& c) { return static_cast<std::size_t>(c.tokens) / kClipContextLength; };
    negative = encode_windows(o.negative_prompt, windows(positive));
    if (windows(*negative) > windows(positive)) positive = encode_windows(o.prompt, windows(*negative));
    if (o.negative_prompt.empty() && config_.force_zeros_for_empty_prompt) {
      std::ranges::fill(negative->context, 0.0f);
      std::ranges::fill(negative->pooled, 0.0f);
    }
  }
  const ImageConditioning image = condition_on(o);
  SamplerOptions sampling = o.sampler;
  sampling.first_step = o.sampler.steps - steps_run(o);
  const std::unique_ptr<Sampler> sampler = make_sampler(config_.scheduler, sampling);
  std::vector<float> latents(initial_noise.begin(), initial_noise.end());
  // From noise alone, as diffusers' inpainting at full strength; else the image's latents noised to
  // the first step's level.
  if (image.image_latents.empty() || (o.init->strength >= 1 && !o.init->mask.empty())) {
    for (float& v : latents) v *= static_cast<float>(sampler->init_noise_sigma());
  } else {
    sampler->add_noise(image.image_latents, initial_noise, sampler->schedule()[0].sigma, latents);
  }
  denoise(*sampler, latents, o, positive, negative ? &*negative : nullptr, image, initial_noise, step_noise, progress);
  return decode(latents, o.batch, h, w, o.vae_tiling);
}

Images Pipeline::decode(std::span<const float> latents, int batch, int height, int width,
                        const std::optional<VaeTiling>& tiling) const {
  const VaeConfig& vae = config_.vae;
  Images out{batch, width * vae.downscale(), height * vae.downscale(), {}};
  const std::size_t plane = static_cast<std::size_t>(out.width) * out.height;
  const std::size_t latent_size = static_cast<std::size_t>(vae.latent_channels) * height * width;
  out.pixels.resize(static_cast<std::size_t>(batch) * plane * 3);
  // One image at a time, as A1111 decodes a batch: the VAE's activations at full resolution are the
  // largest of the whole pipeline, and a batch of them would multiply the peak memory by its size.
  for (int n = 0; n < batch; ++n) {
    std::vector<float> scaled(latents.begin() + n * latent_size, latents.begin() + (n + 1) * latent_size);
    for (float& v : scaled) v = v / vae.scaling_factor + vae.shift_factor;
    const Tensor z = backend_.upload(scaled, {1, vae.latent_channels, height, width});
    const std::vector<float> image = backend_.download(tiling ? vae_.decode(z, *tiling) : vae_.decode(z));
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < 3; ++c) {
        const float v = image[c * plane + p] * 0.5f + 0.5f;
        out.pixels[(n * plane + p) * 3 + c] = std::clamp(v, 0.0f, 1.0f);
      }
  }
  return out;
}

}  // namespace rf::stable_diffusion
