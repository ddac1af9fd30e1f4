#include "models/stable_diffusion/synthetic.h"

#include <cmath>

#include "models/stable_diffusion/expected_tensors.h"
#include "util/error.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion {

namespace {

ClipTextConfig clip_l() {
  return {.vocab_size = 49408, .hidden = 768, .layers = 12, .heads = 12, .intermediate = 3072, .quick_gelu = true};
}

PipelineConfig sd15() {
  PipelineConfig c;
  c.architecture = Architecture::sd1;
  c.unet.levels = {{320, true, 1, 8}, {640, true, 1, 8}, {1280, true, 1, 8}, {1280, false, 1, 8}};
  c.unet.mid_heads = 8;
  c.unet.cross_attention_dim = 768;
  c.unet.sample_size = 64;
  c.text_encoder = clip_l();
  c.scheduler = {.beta_schedule = BetaSchedule::scaled_linear, .beta_start = 0.00085, .beta_end = 0.012, .steps_offset = 1};
  return c;
}

PipelineConfig sdxl() {
  PipelineConfig c = sd15();
  c.architecture = Architecture::sdxl;
  c.unet.levels = {{320, false, 1, 5}, {640, true, 2, 10}, {1280, true, 10, 20}};
  c.unet.mid_heads = 20;
  c.unet.mid_transformer_depth = 10;
  c.unet.cross_attention_dim = 2048;
  c.unet.linear_projection = true;
  c.unet.text_time_embedding = true;
  c.unet.addition_time_embed_dim = 256;
  c.unet.addition_embed_input_dim = 2816;
  c.unet.sample_size = 128;
  c.vae.scaling_factor = 0.13025f;
  c.vae.force_upcast = true;
  c.vae.sample_size = 1024;
  c.text_encoder_2 = ClipTextConfig{.hidden = 1280, .layers = 32, .heads = 20, .intermediate = 5120, .quick_gelu = false,
                                    .projection_dim = 1280, .padding = ClipPadding::Zero};
  c.scheduler.spacing = Spacing::leading;
  c.force_zeros_for_empty_prompt = true;
  return c;
}

// One tensor's values: norm scales 1, other 1-D parameters small, matrices uniform in +-sqrt(3 / fan_in).
void fill(const Parameter& p, std::vector<std::uint16_t>& out, std::uint64_t seed) {
  std::size_t n = 1;
  for (const auto d : p.shape) n *= d;
  out.resize(n);
  const bool is_norm_scale = p.shape.size() == 1 && p.name.find("norm") != std::string::npos && p.name.ends_with(".weight");
  const std::size_t fan_in = p.shape.size() > 1 ? n / p.shape[0] : 1;
  const float bound = p.shape.size() > 1 ? std::sqrt(3.0f / static_cast<float>(fan_in)) : 0.02f;
  std::uint64_t state = seed | 1;
  for (std::size_t i = 0; i < n; ++i) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;  // xorshift64
    const float unit = static_cast<float>(state >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
    out[i] = f32_to_f16(is_norm_scale ? 1.0f : unit * bound);
  }
}

void add_part(SyntheticWeights& out, TensorSet& set, const std::vector<Parameter>& parameters, ThreadPool& pool,
              std::uint64_t seed) {
  const std::size_t first = out.storage.size();
  out.storage.resize(first + parameters.size());
  pool.parallel_for(parameters.size(), 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) fill(parameters[i], out.storage[first + i], seed + i * 0x9E3779B97F4A7C15ull);
  });
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const auto& values = out.storage[first + i];
    set.add(make_tensor_view(set.source(), parameters[i].name, DType::F16, parameters[i].shape, values.size() * 2,
                             values.data()));
  }
}

}  // namespace

PipelineConfig published_config(std::string_view name) {
  if (name == "sd15") return sd15();
  if (name == "sdxl") return sdxl();
  fail("unknown synthetic model '{}' (known: sd15, sdxl)", name);
}

void make_synthetic_weights(SyntheticWeights& out, const PipelineConfig& config, ThreadPool& pool, std::uint64_t seed) {
  out.config = config;
  add_part(out, out.unet, unet_parameters(config.unet), pool, seed);
  add_part(out, out.vae, vae_parameters(config.vae), pool, seed + 1);
  add_part(out, out.text_encoder, clip_parameters(config.text_encoder, ClipNaming::transformers), pool, seed + 2);
  if (config.text_encoder_2) {
    out.text_encoder_2.emplace("synthetic text encoder 2");
    add_part(out, *out.text_encoder_2, clip_parameters(*config.text_encoder_2, ClipNaming::open_clip), pool, seed + 3);
  }
}

}  // namespace rf::stable_diffusion
