#pragma once
// Stable Diffusion's samplers on host float arrays, each computing what its diffusers scheduler
// computes, step for step (tests/models/stable_diffusion/samplers_test.cpp holds them to diffusers'
// trajectories):
//
//   euler         EulerDiscreteScheduler                 heun     HeunDiscreteScheduler
//   euler_a       EulerAncestralDiscreteScheduler        ddim     DDIMScheduler (with eta)
//   dpmpp_2m      DPMSolverMultistepScheduler, dpmsolver++, order 2
//   dpmpp_2m_sde  the same with algorithm_type sde-dpmsolver++
//   lcm           LCMScheduler                           unipc    UniPCMultistepScheduler (bh2, order 2)
//
// and one diffusers lacks, A1111's "DPM++ 2S a", written from k-diffusion's algorithm (see
// dpmpp_2s_ancestral_step; dpmpp_2s_ancestral_test.cpp holds it to exact solutions):
//
//   dpmpp_2s_a    k-diffusion's sample_dpmpp_2s_ancestral, on the Euler family's schedule
//
// The latents live where diffusers keeps them: Euler, Euler ancestral, Heun (and DPM++ 2S a) in
// k-diffusion's variance-exploding space (x0 + sigma * noise, started at init_noise_sigma), the
// others in the variance-preserving one (started at 1); after the last step both are the denoised
// latents.
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "models/stable_diffusion/noise.h"
#include "models/stable_diffusion/schedule.h"

namespace rf::stable_diffusion {

enum class SamplerKind { euler, euler_ancestral, heun, dpmpp_2m, dpmpp_2m_sde, dpmpp_2s_ancestral, ddim, lcm, unipc };

// The UNet at one step (with classifier-free guidance, batch and all): reads `input`, the latents
// as the model takes them, and writes its prediction (noise or v, as the config says) to `output`.
using Model = std::function<void(std::span<const float> input, double timestep, std::span<float> output)>;

// k-diffusion's denoiser: the denoised latents for variance-exploding latents x (x0 + sigma noise)
// at any noise level sigma, on the schedule or between its steps.
using Denoiser = std::function<void(std::span<const float> x, double sigma, std::span<float> denoised)>;

struct SamplerOptions {
  SamplerKind kind = SamplerKind::euler;
  SigmaSchedule sigmas = SigmaSchedule::model_default;
  int steps = 20;
  double eta = 0.0;  // DDIM's: 0 deterministic, 1 as DDPM
  // Image to image: the schedule's steps before this one are left out, and the run starts from the
  // init image's latents noised to its level (diffusers' strength: first_step = steps - strength * steps).
  int first_step = 0;
};

class Sampler {
 public:
  virtual ~Sampler() = default;

  const Schedule& schedule() const { return schedule_; }
  int steps() const { return static_cast<int>(schedule_.size()); }
  // The first latents are standard normal noise times this.
  double init_noise_sigma() const { return init_noise_sigma_; }
  // x0 noised to level `sigma` in this sampler's space (diffusers' scheduler.add_noise): x0 + sigma
  // noise where the latents are variance-exploding (Euler, Euler a, Heun, DPM++ 2S a), alpha x0 +
  // sigma_vp noise otherwise. out may alias x0.
  void add_noise(std::span<const float> x0, std::span<const float> noise, double sigma, std::span<float> out) const;

  // Step i, in order from 0 to steps() - 1: calls the model (Heun twice but on the last step, DPM++
  // 2S a twice but on steps straight to sigma 0) and moves `latents` to the next noise level.
  // Ancestral and SDE samplers draw one tensor of the latents' size from `noise` per step, after
  // the model, where diffusers (k-diffusion for DPM++ 2S a) draws it.
  void step(int i, std::span<float> latents, const Model& model, NoiseSource& noise);

 protected:
  Sampler(Schedule schedule, Prediction prediction, double init_noise_sigma);
  virtual bool variance_exploding() const = 0;
  virtual void advance(int i, std::span<float> latents, const Model& model, NoiseSource& noise) = 0;

  // Runs the model at step i's timestep on `x` times `input_scale`; the prediction is model_output_.
  void call_model(const Model& model, int i, std::span<const float> x, double input_scale);
  // The same at any timestep.
  void run_model(const Model& model, double timestep, std::span<const float> x, double input_scale);
  // A tensor of `size` draws, in noise_.
  void draw(NoiseSource& noise, std::size_t size);

  Schedule schedule_;
  Prediction prediction_;
  std::vector<float> model_output_;
  std::vector<float> noise_;

 private:
  double init_noise_sigma_;
  std::vector<float> model_input_;
  int next_step_ = 0;
};

std::unique_ptr<Sampler> make_sampler(const SchedulerConfig& config, const SamplerOptions& options);

// One step of DPM++ 2S ancestral (DPM-Solver++(2S), arXiv 2211.01095, with k-diffusion's ancestral
// split) on variance-exploding latents x from noise level `sigma` to `next`: a second-order
// step down to sigma_down, the denoiser called at sigma and at the midpoint in log sigma, then
// fresh noise of sigma_up (sigma_down^2 + sigma_up^2 = next^2; eta 0 deterministic, 1 ancestral).
// Where sigma_down is 0, an Euler step with one call. Draws one tensor from `noise` if next > 0.
void dpmpp_2s_ancestral_step(std::span<float> x, double sigma, double next, double eta, const Denoiser& denoise,
                             NoiseSource& noise);

// Every sampler by the name the CLI and the servers take.
inline constexpr std::pair<std::string_view, SamplerKind> kSamplerNames[] = {
    {"euler", SamplerKind::euler},         {"euler_a", SamplerKind::euler_ancestral},
    {"heun", SamplerKind::heun},           {"dpmpp_2m", SamplerKind::dpmpp_2m},
    {"dpmpp_2m_sde", SamplerKind::dpmpp_2m_sde}, {"dpmpp_2s_a", SamplerKind::dpmpp_2s_ancestral},
    {"ddim", SamplerKind::ddim},           {"lcm", SamplerKind::lcm},
    {"unipc", SamplerKind::unipc}};

// One of kSamplerNames' names; fails listing them.
SamplerKind parse_sampler(std::string_view name);

}  // namespace rf::stable_diffusion
