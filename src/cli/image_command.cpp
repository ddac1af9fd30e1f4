// rocmforge image: text to image with a Stable Diffusion checkpoint, written as PNG with A1111's
// "parameters" text so that the image can be dropped back into A1111 or ComfyUI.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/backend_select.h"
#include "formats/image_file.h"
#include "models/stable_diffusion/checkpoint.h"
#include "models/stable_diffusion/generation_parameters.h"
#include "models/stable_diffusion/lora.h"
#include "models/stable_diffusion/pipeline.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::cli {

namespace sd = rf::stable_diffusion;

namespace {

struct ImageFlags {
  std::string model, vae, config, prediction, output = "output.png", init_image, mask;
  double strength = 0.75;
  std::vector<std::string> loras;  // FILE or FILE:STRENGTH
  std::string sampler = "euler_a", schedule = "default", rng = "cpu", batch_seeds = "per-image",
              device = "auto";
  sd::GenerationOptions options;
  int threads = 0;
  bool vae_tiling = false;
  CLI::Option* seed = nullptr;
};

// "out.png" for one image; "out-1.png", "out-2.png", ... for a batch.
std::string output_path(const std::string& output, int index, int batch) {
  if (batch == 1) return output;
  const std::filesystem::path p(output);
  return (p.parent_path() / fmt::format("{}-{}{}", p.stem().string(), index + 1, p.extension().string())).string();
}

// "FILE:STRENGTH" (the strength after the last ':', when it is a number) or "FILE" (strength 1).
sd::LoraFile parse_lora(const std::string& value) {
  const std::size_t colon = value.rfind(':');
  if (colon != std::string::npos) {
    const std::string number = value.substr(colon + 1);
    char* end = nullptr;
    const double strength = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size()) return {value.substr(0, colon), strength};
  }
  return {value, 1.0};
}

// The init image (and mask) as the pipeline takes them: RGB in [0, 1], the mask's gray in [0, 1].
sd::InitImage read_init(const ImageFlags& f) {
  const Image rgb = read_image(f.init_image);
  sd::InitImage init{sd::from_rgb8(rgb), {}, f.strength};
  if (!f.mask.empty()) {
    const Image mask = read_mask(f.mask);
    if (mask.width != rgb.width || mask.height != rgb.height) {
      fail("--mask {} is {}x{}, the init image {}x{}: they must be the same size", f.mask, mask.width, mask.height,
           rgb.width, rgb.height);
    }
    init.mask.resize(mask.pixels.size());
    std::ranges::transform(mask.pixels, init.mask.begin(), [](std::uint8_t v) { return v / 255.0f; });
  }
  return init;
}

// A line on stderr redrawn each step: the bar, the step count and the steps per second.
sd::Progress progress_bar() {
  const auto start = std::chrono::steady_clock::now();
  return [start](const sd::StepState& state) {
    const int step = state.step, steps = state.steps;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int filled = step * 30 / steps;
    fmt::print(stderr, "\r[{}{}] {}/{} steps, {:.2f} it/s", std::string(filled, '#'), std::string(30 - filled, ' '), step,
               steps, seconds > 0 ? step / seconds : 0.0);
    if (step == steps) fmt::print(stderr, "\n");
    return true;
  };
}

// Without -m, the bundled demo model (or $ROCMFORGE_IMAGE_MODEL), which a checkout may lack.
std::string model_path(const std::string& model) {
  if (!model.empty()) return model;
  const std::string path = default_image_model_path();
  if (!std::filesystem::exists(path)) {
    fail("no -m given, and the default image model {} does not exist (set $ROCMFORGE_IMAGE_MODEL or pass -m)", path);
  }
  return path;
}

void run(ImageFlags& f) {
  f.model = model_path(f.model);
  sd::GenerationOptions& o = f.options;
  o.sampler.kind = sd::parse_sampler(f.sampler);
  o.sampler.sigmas = f.schedule == "default" ? sd::SigmaSchedule::model_default : sd::parse_sigma_schedule(f.schedule);
  if (f.rng != "cpu" && f.rng != "cuda") fail("--rng {}: expected cpu (torch's CPU generator) or cuda (torch's CUDA generator)", f.rng);
  o.rng = f.rng == "cpu" ? sd::Rng::torch_cpu : sd::Rng::torch_cuda;
  if (f.batch_seeds != "per-image" && f.batch_seeds != "shared") {
    fail("--batch-seeds {}: expected per-image (seed + i for image i, as A1111) or shared (one generator)", f.batch_seeds);
  }
  o.batch_seeds = f.batch_seeds == "shared" ? sd::BatchSeeds::shared : sd::BatchSeeds::per_image;
  if (!f.seed->count()) o.seed = std::random_device{}();
  if (!f.mask.empty() && f.init_image.empty()) fail("--mask needs --init-img, the image to inpaint");
  if (!f.init_image.empty()) o.init = read_init(f);
  if (f.vae_tiling) o.vae_tiling = sd::VaeTiling{};

  sd::OpenOptions open;
  open.vae = f.vae;
  open.config = f.config;
  if (!f.prediction.empty()) open.prediction = sd::parse_prediction(f.prediction);
  open.clip_vocab = ROCMFORGE_CLIP_VOCAB;
  const sd::Checkpoint checkpoint = sd::Checkpoint::open(f.model, open);
  std::vector<sd::LoraFile> loras;
  for (const std::string& value : f.loras) loras.push_back(parse_lora(value));
  const sd::LoraSet lora(checkpoint.config(), checkpoint.unet(), checkpoint.text_encoder(), checkpoint.text_encoder_2(),
                         loras);
  ThreadPool pool(f.threads);
  const std::unique_ptr<ImageBackend> backend = make_image_backend(f.device, pool);
  const sd::Pipeline pipeline({checkpoint.config(), lora.unet(), checkpoint.vae(), lora.text_encoder(),
                               lora.text_encoder_2(), checkpoint.tokenizer()},
                              *backend);
  o = pipeline.resolve(o);
  fmt::print(stderr, "{} ({}), {}x{}, {} steps of {}, seed {}\n", f.model, sd::architecture_name(checkpoint.config().architecture),
             o.width, o.height, o.sampler.steps, f.sampler, o.seed);
  const sd::Images images = pipeline.generate(o, progress_bar());

  const std::string model_name = std::filesystem::path(f.model).stem().string();
  for (int i = 0; i < images.batch; ++i) {
    const sd::GenerationParameters p = sd::run_parameters(o, i, model_name, loras);
    const std::string path = output_path(f.output, i, images.batch);
    write_png(path, sd::to_rgb8(images, i), {{"parameters", sd::format_infotext(p)}});
    fmt::print(stderr, "wrote {} (seed {})\n", path, p.seed);
  }
}

}  // namespace

void add_image_command(CLI::App& app) {
  auto flags = std::make_shared<ImageFlags>();
  auto& o = flags->options;
  auto* cmd = app.add_subcommand("image", "Make an image from a prompt with a Stable Diffusion checkpoint");
  cmd->add_option("-m,--model", flags->model,
                  "A diffusers folder (model_index.json, unet/, vae/, text_encoder/...) or a single .safetensors "
                  "checkpoint (SD 1.x, 2.x, XL); default: $ROCMFORGE_IMAGE_MODEL, else the bundled demo model "
                  "(models/sd-demo)");
  cmd->add_option("-p,--prompt", o.prompt, "The prompt; A1111's (emphasis), [de-emphasis], (word:1.3) and BREAK work")
      ->required();
  cmd->add_option("-n,--negative-prompt", o.negative_prompt, "What the image should not show");
  cmd->add_option("--steps", o.sampler.steps, "Sampling steps")->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--cfg", o.guidance, "Classifier-free guidance scale (<= 1: none, the negative prompt unused)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--sampler", flags->sampler, "euler, euler_a, heun, dpmpp_2m, dpmpp_2m_sde, dpmpp_2s_a, ddim, lcm or unipc")
      ->capture_default_str();
  cmd->add_option("--schedule", flags->schedule, "Sigma schedule: default (the model's), karras, exponential or sgm_uniform")
      ->capture_default_str();
  cmd->add_option("--eta", o.sampler.eta, "DDIM's eta (0: deterministic)")->check(CLI::Range(0.0, 1.0));
  flags->seed = cmd->add_option("--seed", o.seed, "Seed of the noise (random when not given; printed)");
  cmd->add_option("--rng", flags->rng,
                  "Noise generator: cpu (torch.manual_seed + torch.randn on the CPU, as diffusers scripts) or cuda "
                  "(torch's CUDA generator, as A1111 and ComfyUI on a GPU)")
      ->capture_default_str();
  cmd->add_option("-W,--width", o.width, "Width in pixels, a multiple of 8 (default: the model's native size)");
  cmd->add_option("-H,--height", o.height, "Height in pixels, a multiple of 8 (default: the model's native size)");
  cmd->add_option("--batch", o.batch, "Images to make at once (out-1.png, out-2.png, ...)")->check(CLI::Range(1, 64));
  cmd->add_option("--batch-seeds", flags->batch_seeds,
                  "A batch's noise: per-image (image i from its own generator seeded seed + i, as A1111 and "
                  "diffusers given one generator per image; the default, so that each PNG names its own seed and "
                  "remakes alone at batch 1) or shared (the whole batch from one generator, as a diffusers script "
                  "passing one generator; every PNG names the batch's seed)")
      ->capture_default_str();
  cmd->add_option("--init-img", flags->init_image,
                  "Image to image: start from this PNG, JPEG or WebP (the output takes its size)");
  cmd->add_option("--strength", flags->strength,
                  "How much of the init image to repaint: the share of the steps that run (1: from noise)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--mask", flags->mask,
                  "Inpainting: white repaints, black keeps (same size as --init-img; inpainting models or any other)");
  cmd->add_option("--lora", flags->loras,
                  "A kohya/A1111 LoRA .safetensors, FILE or FILE:STRENGTH (default 1); repeat for several");
  cmd->add_flag("--vae-tiling", flags->vae_tiling,
                "Decode (and encode) in overlapping tiles of the model's native size, blended: bounded memory for "
                "large images, as diffusers' enable_tiling()");
  cmd->add_option("--vae", flags->vae, "A separate VAE: a .safetensors file (original or diffusers names) or folder");
  cmd->add_option("--config", flags->config,
                  "A diffusers folder whose configs describe a single-file checkpoint (as diffusers' from_single_file(config=))");
  cmd->add_option("--prediction", flags->prediction, "Override the model's prediction type: epsilon or v_prediction");
  cmd->add_option("--device", flags->device, "auto (the first GPU, else the CPU), cpu, cuda[:N] or rocm[:N]")
      ->capture_default_str();
  add_gpu_memory_option(*cmd);
  cmd->add_option("-t,--threads", flags->threads, "CPU threads (0: one per hardware thread)");
  cmd->add_option("-o,--output", flags->output, "The PNG to write")->capture_default_str();
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
