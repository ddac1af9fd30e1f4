#include "models/stable_diffusion/pipeline.h"

#include <algorithm>
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

}  // namespace

Pipeline::Pipeline(const PipelineParts& parts, ImageBackend& backend)
    : config_(parts.config),
      backend_(backend),
      tokenizer_(parts.tokenizer),
      text_encoder_(parts.text_encoder, parts.config.text_encoder, backend),
      unet_(parts.unet, parts.config.unet, backend),
      vae_(parts.vae, parts.config.vae, backend) {
  if (config_.text_encoder_2) {
    if (!parts.text_encoder_2) fail("this pipeline needs its second text encoder");
    text_encoder_2_.emplace(*parts.text_encoder_2, *config_.text_encoder_2, backend);
  }
}

GenerationOptions Pipeline::resolve(GenerationOptions o) const {
  const int factor = config_.vae.downscale();
  const int native = config_.unet.sample_size * factor;
  if (o.width == 0) o.width = native;
  if (o.height == 0) o.height = native;
  if (o.width < factor || o.width % factor) fail("width {} is not a positive multiple of {}", o.width, factor);
  if (o.height < factor || o.height % factor) fail("height {} is not a positive multiple of {}", o.height, factor);
  if (o.batch < 1) fail("batch {} must be at least 1", o.batch);
  if (o.sampler.steps < 1) fail("steps {} must be at least 1", o.sampler.steps);
  if (!(o.guidance >= 0)) fail("guidance scale {} must be at least 0", o.guidance);
  if (config_.unet.in_channels != config_.vae.latent_channels) {
    fail("this is an inpainting model ({} input channels): it needs an image and a mask", config_.unet.in_channels);
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

void Pipeline::denoise(Sampler& sampler, std::span<float> latents, const GenerationOptions& o,
                       const TextConditioning& positive, const TextConditioning* negative, NoiseSource& step_noise,
                       const Progress& progress) const {
  ImageBackend& b = backend_;
  const int h = o.height / config_.vae.downscale(), w = o.width / config_.vae.downscale();
  const int rows = negative ? 2 * o.batch : o.batch;  // with guidance: the negative rows, then the positive
  const auto stack = [&](const std::vector<float> TextConditioning::*field) {
    std::vector<float> all = negative ? repeat(negative->*field, o.batch) : std::vector<float>{};
    const std::vector<float> pos = repeat(positive.*field, o.batch);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  };
  UnetConditioning cond{b.upload(stack(&TextConditioning::context), {rows, positive.tokens, config_.unet.cross_attention_dim}),
                        std::nullopt, std::nullopt};
  if (config_.unet.text_time_embedding) {
    cond.text_embeds = b.upload(stack(&TextConditioning::pooled), {rows, static_cast<int>(positive.pooled.size())});
    const std::vector<float> ids{static_cast<float>(o.height), static_cast<float>(o.width), 0, 0,
                                 static_cast<float>(o.height), static_cast<float>(o.width)};
    cond.time_ids = b.upload(repeat(ids, rows), {rows, 6});
  }
  const Model model = [&](std::span<const float> input, double timestep, std::span<float> output) {
    const int channels = config_.unet.in_channels;
    const Tensor x = b.upload(negative ? repeat(input, 2) : std::vector<float>(input.begin(), input.end()),
                              {rows, channels, h, w});
    const std::vector<float> prediction = b.download(unet_.forward(x, static_cast<float>(timestep), cond));
    if (!negative) {
      std::ranges::copy(prediction, output.begin());
      return;
    }
    const std::size_t half = prediction.size() / 2;
    for (std::size_t i = 0; i < half; ++i) {
      output[i] = prediction[i] + static_cast<float>(o.guidance) * (prediction[half + i] - prediction[i]);
    }
  };
  for (int i = 0; i < sampler.steps(); ++i) {
    sampler.step(i, latents, model, step_noise);
    if (progress && !progress(i + 1, sampler.steps())) fail("generation cancelled");
  }
}

Images Pipeline::generate(const GenerationOptions& options, const Progress& progress) const {
  const GenerationOptions o = resolve(options);
  const std::size_t size = static_cast<std::size_t>(o.batch) * config_.vae.latent_channels *
                           (o.height / config_.vae.downscale()) * (o.width / config_.vae.downscale());
  std::vector<float> noise(size);
  if (o.rng == Rng::torch_cpu) {
    TorchCpuGenerator generator(o.seed);
    generator.randn(noise);
    return generate(o, noise, generator, progress);
  }
  TorchCudaGenerator generator(o.seed);
  generator.randn(noise);
  return generate(o, noise, generator, progress);
}

Images Pipeline::generate(const GenerationOptions& options, std::span<const float> initial_noise,
                          NoiseSource& step_noise, const Progress& progress) const {
  const GenerationOptions o = resolve(options);
  const int h = o.height / config_.vae.downscale(), w = o.width / config_.vae.downscale();
  if (initial_noise.size() != static_cast<std::size_t>(o.batch) * config_.vae.latent_channels * h * w) {
    fail("initial noise of {} values for {} latents of {}x{}", initial_noise.size(), o.batch, w, h);
  }
  const TextConditioning positive = encode_prompt(o.prompt);
  std::optional<TextConditioning> negative;
  if (o.guidance > 1.0) {
    negative = encode_windows(o.negative_prompt, positive.context.size() / (kClipContextLength * config_.unet.cross_attention_dim));
    if (o.negative_prompt.empty() && config_.force_zeros_for_empty_prompt) {
      std::ranges::fill(negative->context, 0.0f);
      std::ranges::fill(negative->pooled, 0.0f);
    }
  }
  const std::unique_ptr<Sampler> sampler = make_sampler(config_.scheduler, o.sampler);
  std::vector<float> latents(initial_noise.begin(), initial_noise.end());
  for (float& v : latents) v *= static_cast<float>(sampler->init_noise_sigma());
  denoise(*sampler, latents, o, positive, negative ? &*negative : nullptr, step_noise, progress);
  return decode(latents, o.batch, h, w);
}

Images Pipeline::decode(std::span<const float> latents, int batch, int height, int width) const {
  const VaeConfig& vae = config_.vae;
  std::vector<float> scaled(latents.begin(), latents.end());
  for (float& v : scaled) v = v / vae.scaling_factor + vae.shift_factor;
  const std::vector<float> image = backend_.download(vae_.decode(backend_.upload(scaled, {batch, vae.latent_channels, height, width})));
  Images out{batch, width * vae.downscale(), height * vae.downscale(), {}};
  const std::size_t plane = static_cast<std::size_t>(out.width) * out.height;
  out.pixels.resize(static_cast<std::size_t>(batch) * plane * 3);
  for (int n = 0; n < batch; ++n)
    for (std::size_t p = 0; p < plane; ++p)
      for (int c = 0; c < 3; ++c) {
        const float v = image[(static_cast<std::size_t>(n) * 3 + c) * plane + p] * 0.5f + 0.5f;
        out.pixels[(n * plane + p) * 3 + c] = std::clamp(v, 0.0f, 1.0f);
      }
  return out;
}

}  // namespace rf::stable_diffusion
