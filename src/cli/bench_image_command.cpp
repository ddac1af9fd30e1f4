// rocmforge bench-image: Stable Diffusion's speed on the published model sizes with random weights
// (models/stable_diffusion/synthetic.h), the figures issue #23 compares with diffusers: UNet steps
// per second with classifier-free guidance, seconds per image including the text encoders and the
// VAE decode, and the device memory held.
#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/runner_options.h"
#include "engine/backend_select.h"
#include "models/stable_diffusion/memory_estimate.h"
#include "models/stable_diffusion/pipeline.h"
#include "models/stable_diffusion/synthetic.h"
#include "util/thread_pool.h"

namespace rf::cli {

namespace sd = rf::stable_diffusion;

namespace {

struct BenchImageFlags {
  std::string synthetic = "sd15", device = "auto", sampler = "euler";
  int width = 0, height = 0, steps = 20, repeats = 3, threads = 0;
  std::vector<int> batches{1};
};

double median(std::vector<double> v) {
  std::ranges::sort(v);
  return v[v.size() / 2];
}

struct Timing {
  double seconds;       // the whole generate(): text encoders, steps, VAE decode
  double step_seconds;  // the mean step after the first
};

Timing time_one(const sd::Pipeline& pipeline, const sd::GenerationOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Clock::time_point first_step, last_step;
  pipeline.generate(o, [&](const sd::StepState& state) {
    (state.step == 1 ? first_step : last_step) = Clock::now();
    return true;
  });
  const auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  return {seconds(Clock::now() - start), seconds(last_step - first_step) / (o.sampler.steps - 1)};
}

void run(const BenchImageFlags& f) {
  if (f.steps < 2) fail("--steps {}: the step time needs at least 2 steps", f.steps);
  ThreadPool pool(f.threads);
  sd::SyntheticWeights weights;
  sd::make_synthetic_weights(weights, sd::published_config(f.synthetic), pool, 42);
  const ClipTokenizer tokenizer = ClipTokenizer::from_folder(ROCMFORGE_CLIP_VOCAB);
  const std::unique_ptr<ImageBackend> backend = make_image_backend(f.device, pool);
  const sd::PipelineParts parts{weights.config, weights.unet, weights.vae, weights.text_encoder,
                                weights.text_encoder_2 ? &*weights.text_encoder_2 : nullptr, tokenizer};
  const sd::Pipeline pipeline(parts, *backend);
  // "dry-run GiB": info's estimate (models/stable_diffusion/memory_estimate.h), beside the measured.
  fmt::print("| model | size | batch | steps | UNet it/s (CFG) | s/image | device GiB | dry-run GiB | first run s |\n"
             "|---|---|---|---|---|---|---|---|---|\n");
  for (const int batch : f.batches) {
    sd::GenerationOptions o;
    o.prompt = "a photograph of an astronaut riding a horse on the moon";
    o.negative_prompt = "blurry, low quality";
    o.width = f.width;
    o.height = f.height;
    o.batch = batch;
    o.sampler.kind = sd::parse_sampler(f.sampler);
    o.sampler.steps = f.steps;
    o = pipeline.resolve(o);
    std::vector<double> totals, steps;
    // The first run is a warm-up (allocations, cuBLAS's plans, each convolution shape's timing), left
    // out of the medians and shown apart: what a one-off `rocmforge image` pays.
    const Timing first = time_one(pipeline, o);
    for (int r = 0; r < f.repeats; ++r) {
      const Timing t = time_one(pipeline, o);
      totals.push_back(t.seconds);
      steps.push_back(t.step_seconds);
    }
    const double gib = 1u << 30;
    fmt::print("| {} | {}x{} | {} | {} | {:.2f} | {:.3f} | {:.2f} | {:.2f} | {:.2f} |\n", f.synthetic, o.width, o.height,
               batch, f.steps, 1.0 / median(steps), median(totals) / batch, backend->device_bytes() / gib,
               sd::estimate_memory(parts, o).total() / gib, first.seconds);
  }
}

}  // namespace

void add_bench_image_command(CLI::App& app) {
  auto flags = std::make_shared<BenchImageFlags>();
  auto* cmd = app.add_subcommand("bench-image", "Measure Stable Diffusion's speed at a published model's size, random weights");
  cmd->add_option("--synthetic", flags->synthetic, "sd15 or sdxl")->capture_default_str();
  cmd->add_option("-W,--width", flags->width, "Width (default: the model's native size)");
  cmd->add_option("-H,--height", flags->height, "Height (default: the model's native size)");
  cmd->add_option("--steps", flags->steps, "Steps per image")->capture_default_str();
  cmd->add_option("-b,--batch", flags->batches, "Batch sizes, comma-separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--sampler", flags->sampler, "The sampler")->capture_default_str();
  cmd->add_option("-r,--repeats", flags->repeats, "Timed runs per batch size (the median is shown)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--device", flags->device, "auto, cpu, cuda[:N] or rocm[:N]")->capture_default_str();
  add_gpu_memory_option(*cmd);
  cmd->add_option("-t,--threads", flags->threads, "CPU threads (0: one per hardware thread)");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace rf::cli
