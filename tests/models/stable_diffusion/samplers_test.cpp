// Every shipped sampler's trajectory against diffusers' (fixture cases: SD 1.5 epsilon and SD 2.1
// v-prediction, SDXL's leading and Turbo's trailing spacing, each sigma schedule), from the same
// initial noise, with the UNet replaced by the fixture's closed-form stand-in and the ancestral and
// SDE noise replayed as diffusers drew it. The latents after each step are within 1e-5 of their
// largest value: both sides are float32, rocmforge's weights in double.
#include "models/stable_diffusion/samplers.h"

#include <cmath>

#include "sampler_cases.h"

namespace rf::stable_diffusion {
namespace {

using fixture::sampling;

constexpr double kTolerance = 1e-5;

// The fixture's stand-in for the UNet: x * a(t) + b(t), each product and sum rounded to float32.
void stand_in_model(std::span<const float> x, double t, std::span<float> out) {
  const auto a = static_cast<float>(0.3 * std::cos(t / 1000)), b = static_cast<float>(0.1 * std::sin(t / 100));
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float scaled = x[i] * a;
    out[i] = scaled + b;
  }
}

std::vector<float> initial_latents(const Sampler& sampler) {
  auto latents = fixture::floats(sampling()["initial_noise"]["values"]);
  const auto scale = static_cast<float>(sampler.init_noise_sigma());
  for (float& v : latents) v *= scale;
  return latents;
}

TEST(Samplers, TrajectoriesAsDiffusers) {
  for (const auto* c : fixture::shipped_cases()) {
    const std::string name = (*c)["name"];
    const auto sampler = fixture::make_case_sampler(*c);
    auto latents = initial_latents(*sampler);
    fixture::RecordedNoise noise((*c)["noise"]);
    double worst = 0;
    for (int i = 0; i < sampler->steps(); ++i) {
      sampler->step(i, latents, stand_in_model, noise);
      const auto& want = (*c)["latents"][fixture::diffusers_call(*c, i, sampler->steps())];
      worst = std::max(worst, fixture::scaled_error(latents, fixture::floats(want)));
    }
    fixture::check(fmt::format("{} ({} steps, worst step)", name, sampler->steps()), worst, kTolerance);
    EXPECT_EQ(noise.drawn(), (*c)["noise"].size()) << name << ": noise tensors drawn";
  }
}

TEST(Samplers, StepNoiseIsTorchsCpuGenerator) {
  // What diffusers drew in the cases was the CPU generator seeded with noise_seed: the same draws
  // from TorchCpuGenerator make the same trajectory.
  for (const auto* c : fixture::shipped_cases()) {
    if ((*c)["noise"].empty()) continue;
    TorchCpuGenerator generator((*c)["noise_seed"].get<std::uint64_t>());
    for (const auto& tensor : (*c)["noise"]) {
      std::vector<float> drawn(tensor.size());
      generator.randn(drawn);
      ASSERT_EQ(drawn, fixture::floats(tensor)) << (*c)["name"];
    }
  }
}

TEST(Samplers, RunInOrder) {
  SamplerOptions options;
  options.steps = 4;
  const auto sampler = make_sampler(SchedulerConfig{}, options);
  std::vector<float> latents(16, 1.0f);
  TorchCpuGenerator noise(0);
  EXPECT_THROW(sampler->step(1, latents, stand_in_model, noise), Error);
  EXPECT_THROW(parse_sampler("dpm2_a"), Error);
}

}  // namespace
}  // namespace rf::stable_diffusion
