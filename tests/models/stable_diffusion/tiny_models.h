#pragma once
// The tiny models' checks against diffusers (tests/fixtures/sd/models, made by
// tools/fixtures/make_sd_model_fixtures.py): each text encoder, one UNet call, a VAE decode and
// encode, and 4-step text-to-image, inpainting and LoRA runs from the committed inputs, on whichever
// ImageBackend a test gives (networks_test.cpp: the CPU; gpu_networks_test.cpp: the GPU). The
// references are float64 computations from the same fp16-valued weights.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/image_backend.h"
#include "formats/safetensors.h"
#include "models/stable_diffusion/checkpoint_fixture.h"
#include "models/stable_diffusion/config_json.h"
#include "models/stable_diffusion/clip_text_encoder.h"
#include "models/stable_diffusion/lora.h"
#include "models/stable_diffusion/pipeline.h"
#include "models/stable_diffusion/unet.h"
#include "models/stable_diffusion/vae.h"
#include "util/expect_close.h"

namespace rf::stable_diffusion::tiny {

// The checks, on the backend a subclass gives (backend_) with its tolerances.
class Networks : public ::testing::TestWithParam<std::string> {
 protected:
  struct Tolerances {
    double tensors;      // max |out - ref| over max |ref|
    double min_psnr_db;  // images
    double vae_tensors;  // the same for the VAEs, whose products may take other inputs (force_upcast)
  };
  explicit Networks(Tolerances tolerances)
      : tolerances_(tolerances),
        dir_(fixture::model_dir(GetParam())),
        reference_(dir_ + "/reference.safetensors"),
        checkpoint_(Checkpoint::open(fixture::folder(GetParam()), fixture::options())) {}
  void use(ImageBackend& backend) { backend_ = &backend; }

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
    return backend_->upload(ref(name), std::vector<int>(t.shape.begin(), t.shape.end()));
  }
  void expect(const std::string& what, const Tensor& out, const std::string& reference) {
    expect(what, out, reference, tolerances_.tensors);
  }
  void expect(const std::string& what, const Tensor& out, const std::string& reference, double tolerance) {
    test::expect_close(GetParam() + " " + what, backend_->download(out), ref(reference), tolerance);
  }
  void check_text_encoder(const ClipTextEncoder& encoder, const std::string& te, const std::string& tokens);
  void check_text_encoders();
  void check_unet();
  void check_vae();
  void check_runs(const std::optional<InitImage>& init);
  void check_text_to_image();
  void check_inpainting();
  void check_lora();
  void check_vae_tiling();
  void check_image_to_image();
  // A reference image [1][3][H][W] in [0, 1] as the pipeline takes images: [1][H][W][3].
  Images image_of(const std::string& name) const;

  Tolerances tolerances_;
  std::string dir_;
  SafetensorsFile reference_;
  Checkpoint checkpoint_;
  ImageBackend* backend_ = nullptr;
};

// `te` is "te" or "te2" (SDXL's second encoder, whose pooled output is projected: text_embeds).
inline void Networks::check_text_encoder(const ClipTextEncoder& encoder, const std::string& te, const std::string& tokens) {
  const std::string pooled = encoder.config().projection_dim > 0 ? "text_embeds" : "pooled";
  for (const std::string text : {"p0", "p1", "p2", "neg"}) {
    const ClipTextOutput out = encoder.forward(ids(tokens + "." + text));
    const std::string name = te + "." + text + ".";
    expect(name + "last_hidden_state", out.last_hidden_state, name + "last_hidden_state");
    expect(name + "penultimate", out.penultimate, name + "penultimate");
    expect(name + pooled, out.pooled, name + pooled);
  }
}

inline void Networks::check_text_encoders() {
  const PipelineConfig& c = checkpoint_.config();
  check_text_encoder(ClipTextEncoder(checkpoint_.text_encoder(), c.text_encoder, *backend_), "te", "tokens");
  if (c.text_encoder_2) {
    check_text_encoder(ClipTextEncoder(*checkpoint_.text_encoder_2(), *c.text_encoder_2, *backend_), "te2", "tokens2");
  }
}

inline void Networks::check_unet() {
  const Unet unet(checkpoint_.unet(), checkpoint_.config().unet, *backend_);
  UnetConditioning cond;
  cond.context = input("unet.in.encoder_hidden_states");
  if (unet.config().text_time_embedding) {
    cond.text_embeds = input("unet.in.text_embeds");
    cond.time_ids = input("unet.in.time_ids");
  }
  const float timestep = ref("unet.in.timestep")[0];
  expect("unet.out", unet.forward(input("unet.in.sample"), timestep, cond), "unet.out.f64");
}

inline void Networks::check_vae() {
  const Vae vae(checkpoint_.vae(), checkpoint_.config().vae, *backend_);
  const double tolerance = tolerances_.vae_tensors;
  expect("vae.decode.out", vae.decode(input("vae.decode.in")), "vae.decode.out", tolerance);
  const LatentDistribution latents = vae.encode(input("vae.encode.in"));
  expect("vae.encode.mean", latents.mean, "vae.encode.mean.f64", tolerance);
  expect("vae.encode.logvar", latents.logvar, "vae.encode.logvar.f64", tolerance);
}

inline double psnr(std::span<const float> a, std::span<const float> b) {
  double squares = 0;
  for (std::size_t i = 0; i < a.size(); ++i) squares += (a[i] - b[i]) * (a[i] - b[i]);
  return 10 * std::log10(1.0 / (squares / a.size()));
}

// The fixture's pipeline runs: 4 steps of diffusers' pipeline from the same initial latents
// (reference.json "runs"), each `check`ed against its image; `init` is the runs' init image.
inline void Networks::check_runs(const std::optional<InitImage>& init) {
  const nlohmann::json doc = fixture::read_json(dir_ + "/reference.json");
  for (const auto& [run, kind, guidance] : {std::tuple{"euler", SamplerKind::euler, 7.5},
                                            std::tuple{"dpmpp_2m", SamplerKind::dpmpp_2m, 7.5},
                                            std::tuple{"euler_cfg1", SamplerKind::euler, 1.0}}) {
    // The scheduler config diffusers ran with: the model's, through the sampler's from_config, whose
    // defaults differ from the saved file's for keys the original config left out (sd15's spacing).
    PipelineConfig config = checkpoint_.config();
    const std::string key = std::string("pipe.") + run;
    config.scheduler = scheduler_config_from_json(doc["runs"][key]["scheduler_config"], key);
    const Pipeline pipeline({config, checkpoint_.unet(), checkpoint_.vae(), checkpoint_.text_encoder(),
                             checkpoint_.text_encoder_2(), checkpoint_.tokenizer()},
                            *backend_);
    GenerationOptions o;
    o.prompt = doc["texts"]["p0"];
    o.negative_prompt = guidance > 1 ? doc["texts"]["neg"].get<std::string>() : "";
    o.guidance = guidance;
    o.sampler.kind = kind;
    o.sampler.steps = doc["steps"];
    o.init = init;
    if (!init) {
      o.width = doc["width"];
      o.height = doc["height"];
    }
    TorchCpuGenerator unused(0);  // Euler and DPM++ 2M draw no noise
    const Images images = pipeline.generate(o, ref("pipe.latents"), unused);
    const double db = psnr(images.pixels, ref(key + ".image"));
    std::printf("[  psnr    ] %s %-10s %.1f dB (at least %.0f)\n", GetParam().c_str(), run, db, tolerances_.min_psnr_db);
    EXPECT_GE(db, tolerances_.min_psnr_db) << run;
    if (init || kind != SamplerKind::euler || guidance <= 1) continue;
    // The single file diffusers' script made from the folder gives the very same image.
    const Checkpoint single = Checkpoint::open(fixture::single_file(GetParam()), fixture::options(fixture::folder(GetParam())));
    const Pipeline from_single({config, single.unet(), single.vae(), single.text_encoder(), single.text_encoder_2(),
                                single.tokenizer()},
                               *backend_);
    EXPECT_EQ(from_single.generate(o, ref("pipe.latents"), unused).pixels, images.pixels) << "single file vs folder";
  }
}

inline void Networks::check_text_to_image() { check_runs(std::nullopt); }

// The inpainting UNet's runs: diffusers' StableDiffusionInpaintPipeline at strength 1 from the same
// image and mask (its masked-image latents are the encoder's mean, as ours).
inline void Networks::check_inpainting() { check_runs(InitImage{image_of("inpaint.image"), ref("inpaint.mask"), 1.0}); }

inline Images Networks::image_of(const std::string& name) const {
  const SafetensorsTensor& t = stored(name);
  const int height = static_cast<int>(t.shape[2]), width = static_cast<int>(t.shape[3]);
  const std::vector<float> nchw = ref(name);
  Images image{1, width, height, std::vector<float>(nchw.size())};
  const std::size_t plane = static_cast<std::size_t>(width) * height;
  for (std::size_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c) image.pixels[p * 3 + c] = nchw[c * plane + p];
  return image;
}

// The kohya LoRA at strengths 1 and 0.5 against diffusers' load_lora_weights (and set_adapters),
// the Euler run of pipe.euler. The merged matrices are rounded back to the fixture's f16, where
// diffusers adds the LoRA's product unrounded: on the CPU (fp32) that leaves the images 68.6 dB
// (strength 1) and 72.5 dB (0.5) from diffusers', against the 45 asked.
inline void Networks::check_lora() {
  const nlohmann::json doc = fixture::read_json(dir_ + "/reference.json");
  PipelineConfig config = checkpoint_.config();
  config.scheduler = scheduler_config_from_json(doc["runs"]["pipe.euler"]["scheduler_config"], "pipe.euler");
  for (const auto& [strength, name] : {std::pair{1.0, "lora.s1.image"}, std::pair{0.5, "lora.s05.image"}}) {
    const LoraSet lora(config, checkpoint_.unet(), checkpoint_.text_encoder(), nullptr,
                       {{dir_ + "/lora.safetensors", strength}});
    EXPECT_EQ(lora.merged_modules(), doc["lora"]["modules"].get<int>());
    for (const TensorView& view : lora.unet()) {  // merged matrices keep their stored type
      EXPECT_EQ(view.dtype, checkpoint_.unet().find(view.name)->dtype) << view.name;
    }
    const Pipeline pipeline({config, lora.unet(), checkpoint_.vae(), lora.text_encoder(), nullptr, checkpoint_.tokenizer()},
                            *backend_);
    GenerationOptions o;
    o.prompt = doc["texts"]["p0"];
    o.negative_prompt = doc["texts"]["neg"];
    o.width = doc["width"];
    o.height = doc["height"];
    o.sampler.steps = doc["steps"];
    TorchCpuGenerator unused(0);
    const double db = psnr(pipeline.generate(o, ref("pipe.latents"), unused).pixels, ref(name));
    std::printf("[  psnr    ] %s %-14s %.1f dB (at least %.0f)\n", GetParam().c_str(), name, db, tolerances_.min_psnr_db);
    EXPECT_GE(db, tolerances_.min_psnr_db) << name;
  }
}

// diffusers' tiled decode (enable_tiling, tiles of 4 latents overlapping by a quarter) of latents
// of odd sizes, whose edge tiles are smaller; and it is not the untiled decode: the two references
// lie further apart than twice the tolerance, so that no output is within it of both.
inline void Networks::check_vae_tiling() {
  const Vae vae(checkpoint_.vae(), checkpoint_.config().vae, *backend_);
  const double tolerance = tolerances_.vae_tensors;
  expect("vae.tiled.out", vae.decode(input("vae.tiled.in"), VaeTiling{4, 0.25}), "vae.tiled.out", tolerance);
  const double seams = test::relative_max_error(ref("vae.tiled.out"), ref("vae.tiled.untiled_out"));
  std::printf("[  seams   ] %s tiled and untiled references %.2e apart\n", GetParam().c_str(), seams);
  EXPECT_GT(seams, 2 * tolerance) << "the seams should show";
}

// Image to image: diffusers' Img2Img pipeline, 8 Euler steps at strength 0.6 (4 run) from the test
// image's latents (the encoder's mean, as ours) and the recorded noise.
inline void Networks::check_image_to_image() {
  const nlohmann::json doc = fixture::read_json(dir_ + "/reference.json");
  const nlohmann::json& run = doc["runs"]["img2img.euler"];
  PipelineConfig config = checkpoint_.config();
  config.scheduler = scheduler_config_from_json(run["scheduler_config"], "img2img.euler");
  const Pipeline pipeline({config, checkpoint_.unet(), checkpoint_.vae(), checkpoint_.text_encoder(),
                           checkpoint_.text_encoder_2(), checkpoint_.tokenizer()},
                          *backend_);
  Images image = image_of("vae.encode.in");  // the test image, in [-1, 1]
  for (float& v : image.pixels) v = (v + 1) / 2;
  GenerationOptions o;
  o.prompt = doc["texts"]["p0"];
  o.negative_prompt = doc["texts"]["neg"];
  o.sampler.steps = run["steps"];
  o.init = InitImage{image, {}, run["strength"].get<double>()};
  TorchCpuGenerator unused(0);
  const double db = psnr(pipeline.generate(o, ref("img2img.noise"), unused).pixels, ref("img2img.euler.image"));
  std::printf("[  psnr    ] %s img2img euler %.1f dB (at least %.0f)\n", GetParam().c_str(), db, tolerances_.min_psnr_db);
  EXPECT_GE(db, tolerances_.min_psnr_db);
}

}  // namespace rf::stable_diffusion::tiny
