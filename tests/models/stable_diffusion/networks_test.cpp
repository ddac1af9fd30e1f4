// The networks against diffusers: each tiny model's text encoders, UNet call and VAE decode/encode
// (tests/fixtures/sd/models, made by tools/fixtures/make_sd_model_fixtures.py) run on the CPU
// backend from the committed inputs, within 1e-4 of the largest reference value (the references
// are float64 computations from the same fp16-valued weights).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/image_backend.h"
#include "formats/safetensors.h"
#include "models/stable_diffusion/clip_text_encoder.h"
#include "models/stable_diffusion/pipeline.h"
#include "models/stable_diffusion/unet.h"
#include "models/stable_diffusion/vae.h"
#include "util/expect_close.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion {
namespace {

constexpr double kTolerance = 1e-4;

std::string model_dir(const std::string& arch) { return std::string(ROCMFORGE_FIXTURES) + "/sd/models/" + arch; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// TEMPORARY until the checkpoint loader lands: the configs from the folder's JSON.
std::vector<int> per_level(const nlohmann::json& v, std::size_t n) {
  if (v.is_array()) return v.get<std::vector<int>>();
  return std::vector<int>(n, v.get<int>());
}
UnetConfig unet_config(const nlohmann::json& j) {
  UnetConfig c;
  c.in_channels = j["in_channels"];
  c.out_channels = j["out_channels"];
  const auto widths = j["block_out_channels"].get<std::vector<int>>();
  const auto heads = per_level(j["num_attention_heads"].is_null() ? j["attention_head_dim"] : j["num_attention_heads"], widths.size());
  const auto depth = per_level(j["transformer_layers_per_block"], widths.size());
  for (std::size_t i = 0; i < widths.size(); ++i) {
    c.levels.push_back({widths[i], j["down_block_types"][i].get<std::string>().starts_with("CrossAttn"), depth[i], heads[i]});
  }
  c.layers_per_block = j["layers_per_block"];
  c.mid_transformer_depth = depth.back();
  c.mid_heads = heads.back();
  c.cross_attention_dim = j["cross_attention_dim"];
  c.linear_projection = j["use_linear_projection"];
  c.norm_groups = j["norm_num_groups"];
  c.text_time_embedding = j["addition_embed_type"] == "text_time";
  if (c.text_time_embedding) {
    c.addition_time_embed_dim = j["addition_time_embed_dim"];
    c.addition_embed_input_dim = j["projection_class_embeddings_input_dim"];
  }
  return c;
}
VaeConfig vae_config(const nlohmann::json& j) {
  VaeConfig c;
  c.block_out_channels = j["block_out_channels"].get<std::vector<int>>();
  c.layers_per_block = j["layers_per_block"];
  c.norm_groups = j["norm_num_groups"];
  c.latent_channels = j["latent_channels"];
  return c;
}
ClipTextConfig clip_config(const nlohmann::json& j) {
  ClipTextConfig c;
  c.hidden = j["hidden_size"];
  c.layers = j["num_hidden_layers"];
  c.heads = j["num_attention_heads"];
  c.intermediate = j["intermediate_size"];
  c.quick_gelu = j["hidden_act"] == "quick_gelu";
  c.projection_dim = j.value("projection_dim", 0);
  if (j["architectures"].is_null() || j["architectures"][0] != "CLIPTextModelWithProjection") c.projection_dim = 0;
  return c;
}

SchedulerConfig scheduler_config(const nlohmann::json& file) {
  SchedulerConfig config;
  config.beta_schedule = parse_beta_schedule(file.value("beta_schedule", "linear"));
  config.beta_start = file.value("beta_start", config.beta_start);
  config.beta_end = file.value("beta_end", config.beta_end);
  config.prediction = parse_prediction(file.value("prediction_type", "epsilon"));
  if (file.contains("timestep_spacing")) config.spacing = parse_spacing(file["timestep_spacing"].get<std::string>());
  config.steps_offset = file.value("steps_offset", 0);
  if (file.contains("set_alpha_to_one")) config.set_alpha_to_one = file["set_alpha_to_one"].get<bool>();
  return config;
}

struct Component {
  explicit Component(const std::string& path) : file(path), tensors(file) {}
  SafetensorsFile file;
  TensorSet tensors;
};

class Networks : public ::testing::TestWithParam<std::string> {
 protected:
  Networks()
      : dir_(model_dir(GetParam())), reference_(dir_ + "/reference.safetensors"), backend_(pool_) {}

  // Reference tensors are read from the file directly: some have 5 dimensions, more than a TensorSet takes.
  const SafetensorsTensor& stored(const std::string& name) const { return reference_.tensors().at(name); }
  std::vector<float> ref(const std::string& name) const {
    const SafetensorsTensor& t = stored(name);
    const std::uint64_t n = Tensor::count(std::vector<int>(t.shape.begin(), t.shape.end()));
    return to_f32(reference_.path(), TensorView{name, t.dtype, 1, {n}, t.size_bytes, t.data});
  }
  std::vector<int> ids(const std::string& name) const {
    const SafetensorsTensor& t = stored(name);
    const auto* values = static_cast<const std::int64_t*>(t.data);
    return {values, values + t.size_bytes / sizeof(std::int64_t)};
  }
  Tensor input(const std::string& name) {
    const SafetensorsTensor& t = stored(name);
    return backend_.upload(ref(name), std::vector<int>(t.shape.begin(), t.shape.end()));
  }
  void expect(const std::string& what, const Tensor& out, const std::string& reference) {
    test::expect_close(GetParam() + " " + what, backend_.download(out), ref(reference), kTolerance);
  }
  std::string folder(const std::string& part) const { return dir_ + "/diffusers/" + part; }
  void check_text_encoder(const std::string& part, const std::string& te, const std::string& tokens);

  std::string dir_;
  SafetensorsFile reference_;
  ThreadPool pool_{2};
  cpu::CpuImageBackend backend_;
};

// `te` is "te" or "te2" (SDXL's second encoder, whose pooled output is projected: text_embeds).
void Networks::check_text_encoder(const std::string& part, const std::string& te, const std::string& tokens) {
  const Component weights(folder(part + "/model.safetensors"));
  const ClipTextEncoder encoder(weights.tensors, clip_config(read_json(folder(part + "/config.json"))), backend_);
  const std::string pooled = encoder.config().projection_dim > 0 ? "text_embeds" : "pooled";
  for (const std::string text : {"p0", "p1", "p2", "neg"}) {
    const ClipTextOutput out = encoder.forward(ids(tokens + "." + text));
    const std::string name = te + "." + text + ".";
    expect(name + "last_hidden_state", out.last_hidden_state, name + "last_hidden_state");
    expect(name + "penultimate", out.penultimate, name + "penultimate");
    expect(name + pooled, out.pooled, name + pooled);
  }
}

TEST_P(Networks, TextEncoderMatchesTransformers) {
  check_text_encoder("text_encoder", "te", "tokens");
  if (GetParam() == "sdxl") check_text_encoder("text_encoder_2", "te2", "tokens2");
}

TEST_P(Networks, UnetMatchesDiffusers) {
  const Component weights(folder("unet/diffusion_pytorch_model.safetensors"));
  const Unet unet(weights.tensors, unet_config(read_json(folder("unet/config.json"))), backend_);
  UnetConditioning cond{input("unet.in.encoder_hidden_states"), std::nullopt, std::nullopt};
  if (unet.config().text_time_embedding) {
    cond.text_embeds = input("unet.in.text_embeds");
    cond.time_ids = input("unet.in.time_ids");
  }
  const float timestep = ref("unet.in.timestep")[0];
  expect("unet.out", unet.forward(input("unet.in.sample"), timestep, cond), "unet.out.f64");
}

TEST_P(Networks, VaeMatchesDiffusers) {
  const Component weights(folder("vae/diffusion_pytorch_model.safetensors"));
  const Vae vae(weights.tensors, vae_config(read_json(folder("vae/config.json"))), backend_);
  expect("vae.decode.out", vae.decode(input("vae.decode.in")), "vae.decode.out");
  const LatentDistribution latents = vae.encode(input("vae.encode.in"));
  expect("vae.encode.mean", latents.mean, "vae.encode.mean.f64");
  expect("vae.encode.logvar", latents.logvar, "vae.encode.logvar.f64");
}

double psnr(std::span<const float> a, std::span<const float> b) {
  double squares = 0;
  for (std::size_t i = 0; i < a.size(); ++i) squares += (a[i] - b[i]) * (a[i] - b[i]);
  return 10 * std::log10(1.0 / (squares / a.size()));
}

// Text to image, 4 steps, against diffusers' pipelines from the same initial latents (the
// inpainting model's runs need a mask: not yet).
class TextToImage : public Networks {};

TEST_P(TextToImage, MatchesDiffusers) {
  const nlohmann::json doc = read_json(dir_ + "/reference.json");
  PipelineConfig config;
  config.unet = unet_config(read_json(folder("unet/config.json")));
  config.vae = vae_config(read_json(folder("vae/config.json")));
  config.vae.scaling_factor = doc["scaling_factor"];
  config.text_encoder = clip_config(read_json(folder("text_encoder/config.json")));
  const Component unet(folder("unet/diffusion_pytorch_model.safetensors"));
  const Component vae(folder("vae/diffusion_pytorch_model.safetensors"));
  const Component te(folder("text_encoder/model.safetensors"));
  std::optional<Component> te2;
  if (GetParam() == "sdxl") {
    config.text_encoder_2 = clip_config(read_json(folder("text_encoder_2/config.json")));
    config.text_encoder_2->padding = ClipPadding::Zero;
    te2.emplace(folder("text_encoder_2/model.safetensors"));
  }
  if (GetParam() == "sd2") config.text_encoder.padding = ClipPadding::Zero;
  const ClipTokenizer tokenizer = ClipTokenizer::from_folder(std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip");
  for (const auto& [run, kind, guidance] : {std::tuple{"euler", SamplerKind::euler, 7.5},
                                            std::tuple{"dpmpp_2m", SamplerKind::dpmpp_2m, 7.5},
                                            std::tuple{"euler_cfg1", SamplerKind::euler, 1.0}}) {
    // The scheduler config diffusers ran with (the model's, through the sampler's from_config).
    config.scheduler = scheduler_config(doc["runs"][std::string("pipe.") + run]["scheduler_config"]);
    const Pipeline pipeline({config, unet.tensors, vae.tensors, te.tensors, te2 ? &te2->tensors : nullptr, tokenizer},
                            backend_);
    GenerationOptions o;
    o.prompt = doc["texts"]["p0"];
    o.negative_prompt = guidance > 1 ? doc["texts"]["neg"].get<std::string>() : "";
    o.width = doc["width"];
    o.height = doc["height"];
    o.guidance = guidance;
    o.sampler.kind = kind;
    o.sampler.steps = doc["steps"];
    TorchCpuGenerator unused(0);
    const Images images = pipeline.generate(o, ref("pipe.latents"), unused);
    const double db = psnr(images.pixels, ref(std::string("pipe.") + run + ".image"));
    std::printf("[  psnr    ] %s %-10s %.1f dB (at least 45)\n", GetParam().c_str(), run, db);
    EXPECT_GE(db, 45.0) << run;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, Networks, ::testing::Values("sd15", "sd2", "sdxl", "sd15_inpaint"));
INSTANTIATE_TEST_SUITE_P(TinyModels, TextToImage, ::testing::Values("sd15", "sd2", "sdxl"));

}  // namespace
}  // namespace rf::stable_diffusion
