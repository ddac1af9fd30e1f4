// What a run reports after each step (StepState's denoised estimate) and the cheap preview made
// from it (latent_preview.h).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/image_backend.h"
#include "models/stable_diffusion/checkpoint_fixture.h"
#include "models/stable_diffusion/latent_preview.h"
#include "models/stable_diffusion/pipeline.h"
#include "models/stable_diffusion/sampling_fixture.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion {
namespace {

Pipeline pipeline(const Checkpoint& c, ImageBackend& backend) {
  return Pipeline({c.config(), c.unet(), c.vae(), c.text_encoder(), c.text_encoder_2(), c.tokenizer()}, backend);
}

double mean_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(static_cast<double>(a[i]) - b[i]);
  return sum / a.size();
}

// Euler's last step goes to sigma 0 along the estimate, so the last step's estimate is the latents
// the image is decoded from: epsilon (SD 1.5) and v-prediction (SD 2) alike.
TEST(StepState, TheLastStepsEstimateIsWhatIsDecoded) {
  ThreadPool pool(2);
  cpu::CpuImageBackend backend(pool);
  for (const char* arch : {"sd15", "sd2"}) {
    const Checkpoint checkpoint = Checkpoint::open(fixture::folder(arch), fixture::options());
    const Pipeline p = pipeline(checkpoint, backend);
    GenerationOptions o;
    o.prompt = "a lighthouse at dusk";
    o.sampler.kind = SamplerKind::euler;
    o.sampler.steps = 5;
    o.seed = 7;
    StepState last;
    std::vector<float> denoised(1, std::nanf(""));
    int calls = 0;
    const Images image = p.generate(o, [&](const StepState& state) {
      EXPECT_EQ(state.step, ++calls);
      last = state;
      denoised.assign(state.denoised.begin(), state.denoised.end());
      return true;
    });
    ASSERT_EQ(calls, 5);
    EXPECT_EQ(last.steps, 5);
    ASSERT_EQ(denoised.size(), static_cast<std::size_t>(last.channels) * last.height * last.width);
    const Images again = p.decode(denoised, 1, last.height, last.width);
    fixture::check(fmt::format("{}: decode(last estimate) against the image", arch),
                   fixture::scaled_error(again.pixels, image.pixels), 1e-4);
  }
}

TEST(StepState, ReturningFalseStopsTheRun) {
  ThreadPool pool(2);
  cpu::CpuImageBackend backend(pool);
  const Checkpoint checkpoint = Checkpoint::open(fixture::folder("sd15"), fixture::options());
  const Pipeline p = pipeline(checkpoint, backend);
  GenerationOptions o;
  o.prompt = "a lighthouse";
  o.sampler.steps = 6;
  int calls = 0;
  EXPECT_THROW(p.generate(o, [&](const StepState& state) { return ++calls < 2 && state.step < 6; }), Error);
  EXPECT_EQ(calls, 2);
}

// The demo model's VAE is trained, so its preview map should give a picture's colours back: the
// preview of the picture's latents against the picture averaged over each latent pixel's block.
TEST(LatentPreview, GivesThePicturesColoursBack) {
  ThreadPool pool(2);
  cpu::CpuImageBackend backend(pool);
  OpenOptions open;
  open.clip_vocab = std::string(ROCMFORGE_SOURCE_DIR) + "/models/clip";
  const Checkpoint checkpoint = Checkpoint::open(std::string(ROCMFORGE_SOURCE_DIR) + "/models/sd-demo", open);
  const Pipeline p = pipeline(checkpoint, backend);
  const LatentPreview preview(p);
  ASSERT_EQ(preview.map().size(), 3u * (checkpoint.config().vae.latent_channels + 1));

  // Smooth colour fields, not the chart the map was fitted on.
  const int side = 64, factor = checkpoint.config().vae.downscale(), small = side / factor;
  Images picture{1, side, side, std::vector<float>(side * side * 3)};
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int c = 0; c < 3; ++c)
        picture.pixels[(y * side + x) * 3 + c] = 0.5f + 0.45f * std::sin(0.09f * (c + 1) * x + 0.05f * (3 - c) * y + c);
  std::vector<float> averaged(small * small * 3, 0.0f), mean(3, 0.0f);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x)
      for (int c = 0; c < 3; ++c) {
        const float v = picture.pixels[(y * side + x) * 3 + c];
        averaged[((y / factor) * small + x / factor) * 3 + c] += v / (factor * factor);
        mean[c] += v / (side * side);
      }
  const Images shown = preview.render(p.encode(picture), 1, small, small);
  ASSERT_EQ(shown.pixels.size(), averaged.size());
  std::vector<float> flat(averaged.size());
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = mean[i % 3];
  const double error = mean_abs_difference(shown.pixels, averaged), flat_error = mean_abs_difference(flat, averaged);
  // An eighth of the range; the picture's own mean colour everywhere is off by about 0.28.
  fixture::check("preview against the block-averaged picture (mean |diff|)", error, 0.125);
  fixture::check("the same over a flat image of the mean colour's", error / flat_error, 0.5);
}

}  // namespace
}  // namespace rf::stable_diffusion
