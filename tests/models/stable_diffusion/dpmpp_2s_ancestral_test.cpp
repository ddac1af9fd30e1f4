// DPM++ 2S ancestral, which diffusers lacks, against exact answers instead of a recorded
// trajectory. Data x0 ~ N(0, s^2) has the exact denoiser D(x, sigma) = x s^2 / (s^2 + sigma^2);
// without noise (eta 0) the step must follow the probability-flow ODE, whose solution is
// x(sigma) = x(sigma_max) sqrt((s^2 + sigma^2) / (s^2 + sigma_max^2)), to second order; with it
// (eta 1) the latents' distribution must stay the exact marginal N(0, s^2 + sigma^2) down to the
// data's variance s^2 at sigma 0. Then, through make_sampler, the model calls and noise draws per
// step and the timesteps the model runs at.
#include "models/stable_diffusion/samplers.h"

#include <algorithm>
#include <cmath>

#include "sampling_fixture.h"

namespace rf::stable_diffusion {
namespace {

using fixture::check;

constexpr double kData = 0.8;  // s, the data's standard deviation
constexpr double kSigmaMax = 14.6, kSigmaMin = 0.03;

void gaussian_denoiser(std::span<const float> x, double sigma, std::span<float> out) {
  const double shrink = kData * kData / (kData * kData + sigma * sigma);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * shrink);
}

// Karras et al.'s schedule (rho 7): `count` sigmas from sigma_max down to sigma_min.
std::vector<double> karras(int count) {
  const double max_inv = std::pow(kSigmaMax, 1 / 7.0), min_inv = std::pow(kSigmaMin, 1 / 7.0);
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(std::pow(max_inv + i * (min_inv - max_inv) / (count - 1), 7.0));
  return out;
}

// Counts its draws; every value is `value`.
class ConstantNoise final : public NoiseSource {
 public:
  explicit ConstantNoise(float value) : value_(value) {}
  void randn(std::span<float> out) override {
    ++drawn;
    std::ranges::fill(out, value_);
  }
  int drawn = 0;

 private:
  float value_;
};

// x(sigma_min) / x(sigma_max) on the ODE's exact solution.
double exact_ratio() {
  return std::sqrt((kData * kData + kSigmaMin * kSigmaMin) / (kData * kData + kSigmaMax * kSigmaMax));
}

// The largest relative error at sigma_min of `steps` steps from sigma_max without noise.
double ode_error(int steps) {
  const std::vector<double> sigmas = karras(steps + 1);
  const std::vector<float> start = {14.0f, -7.5f, 3.0f, -0.25f};
  std::vector<float> x = start;
  ConstantNoise noise(1.0f);  // eta 0: drawn, but weighted 0
  for (int i = 0; i < steps; ++i) dpmpp_2s_ancestral_step(x, sigmas[i], sigmas[i + 1], 0.0, gaussian_denoiser, noise);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] / (start[i] * exact_ratio()) - 1));
  return worst;
}

// The same with Euler's first-order steps, in double: what the order check must tell apart.
double euler_error(int steps) {
  const std::vector<double> sigmas = karras(steps + 1);
  double x = 1;
  for (int i = 0; i < steps; ++i) {
    const double sigma = sigmas[i], denoised = x * kData * kData / (kData * kData + sigma * sigma);
    x += (x - denoised) / sigma * (sigmas[i + 1] - sigma);
  }
  return std::abs(x / exact_ratio() - 1);
}

TEST(DpmSolver2SAncestral, WithoutNoiseSolvesTheOdeToSecondOrder) {
  const double coarse = ode_error(20), fine = ode_error(40);
  check("DPM++ 2S, 20 steps 14.6 -> 0.03, relative error", coarse, 8e-3);
  check("DPM++ 2S, 40 steps, relative error", fine, 2e-3);
  // Halving h cuts a second-order method's error 4x, a first-order one's 2x.
  const double order = coarse / fine, euler_order = euler_error(20) / euler_error(40);
  fmt::print("  error ratio 20 -> 40 steps: DPM++ 2S {:.2f} (> 3 asked), Euler {:.2f}\n", order, euler_order);
  EXPECT_GT(order, 3);
  EXPECT_LT(euler_order, 3);
}

// Variance of the final latents: a Monte Carlo estimate over many independent pixels, and the
// exact one of the discretised sampler (each step is x -> k x + sigma_up noise, so the variance
// goes to k^2 v + sigma_up^2, with k and sigma_up read off the step itself).
TEST(DpmSolver2SAncestral, AncestralStepsKeepTheDataVariance) {
  constexpr int kSteps = 100;
  constexpr std::size_t kPixels = 1 << 16;
  std::vector<double> sigmas = karras(kSteps);
  sigmas.push_back(0);
  std::vector<float> x(kPixels);
  TorchCpuGenerator generator(2024);
  generator.randn(x);
  double variance = kData * kData + kSigmaMax * kSigmaMax;
  for (float& v : x) v *= static_cast<float>(std::sqrt(variance));
  for (int i = 0; i < kSteps; ++i) {
    dpmpp_2s_ancestral_step(x, sigmas[i], sigmas[i + 1], 1.0, gaussian_denoiser, generator);
    std::vector<float> k = {1.0f}, up = {0.0f};
    ConstantNoise none(0.0f), ones(1.0f);
    dpmpp_2s_ancestral_step(k, sigmas[i], sigmas[i + 1], 1.0, gaussian_denoiser, none);
    dpmpp_2s_ancestral_step(up, sigmas[i], sigmas[i + 1], 1.0, gaussian_denoiser, ones);
    variance = k[0] * k[0] * variance + up[0] * up[0];
  }
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  const double target = kData * kData;
  // The mean of N squares of N(0, v) has standard deviation v sqrt(2 / N); allowed 5 of them.
  const double statistical = 5 * std::sqrt(2.0 / kPixels);
  // The sampler's own variance is off by its discretisation and by the last step's denoising from
  // sigma_min (s^2 / (s^2 + sigma_min^2), 0.14%): it must leave the statistical check most of its room.
  check(fmt::format("{} steps: the sampler's exact variance vs s^2", kSteps), std::abs(variance / target - 1),
        statistical / 4);
  check(fmt::format("{} pixels: sample variance vs s^2", kPixels), std::abs(sum / kPixels / target - 1),
        statistical);
}

TEST(DpmSolver2SAncestral, CallsTheModelTwiceAndDrawsOnceAStep) {
  SamplerOptions options;
  options.kind = parse_sampler("dpmpp_2s_a");
  options.sigmas = SigmaSchedule::karras;
  options.steps = 5;
  const auto sampler = make_sampler(SchedulerConfig{}, options);
  const Schedule& schedule = sampler->schedule();
  std::vector<double> timesteps;
  const Model model = [&](std::span<const float>, double t, std::span<float> out) {
    timesteps.push_back(t);
    std::ranges::fill(out, 0.1f);
  };
  std::vector<float> latents(16, 1.0f);
  ConstantNoise noise(0.5f);
  double worst = 0;
  for (int i = 0; i < sampler->steps(); ++i) {
    timesteps.clear();
    const int drawn = noise.drawn;
    sampler->step(i, latents, model, noise);
    const bool to_zero = schedule[i].next_sigma == 0;  // sigma_down 0: one call, and no noise after it
    ASSERT_EQ(timesteps.size(), to_zero ? 1u : 2u) << "step " << i;
    EXPECT_EQ(noise.drawn - drawn, to_zero ? 0 : 1) << "step " << i;
    EXPECT_EQ(timesteps[0], schedule[i].timestep) << "step " << i;
    // With eta 1, sigma_down = next^2 / sigma, so the midpoint in log sigma is the next step's
    // sigma: its interpolated timestep is the one the schedule gives that sigma.
    if (!to_zero) worst = std::max(worst, std::abs(timesteps[1] - schedule[i + 1].timestep));
  }
  check("midpoint timesteps vs the next steps' (Karras, 5 steps)", worst, 1e-3);
}

}  // namespace
}  // namespace rf::stable_diffusion
