#pragma once
// The noise schedules of Stable Diffusion's samplers, computed as diffusers does: the training
// betas and their alphas_cumprod, the inference timesteps of each family of schedulers with its
// spacing, and the sigma (noise level) of each step under the chosen sigma schedule.
//
// sigma is the variance-exploding noise level sqrt((1 - alphas_cumprod) / alphas_cumprod): latents
// at level sigma are x0 + sigma * noise, or, scaled by alpha = 1 / sqrt(sigma^2 + 1), the
// variance-preserving alpha * x0 + sigma_vp * noise with sigma_vp = alpha * sigma.
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace rf::stable_diffusion {

enum class BetaSchedule { linear, scaled_linear };
// What the UNet predicts: the noise, or v = alpha * noise - sigma_vp * x0.
enum class Prediction { epsilon, v };
// How the inference timesteps sit among the training ones (the table of arXiv 2305.08891):
// linspace ends at 0, leading starts near 0 and is shifted by steps_offset, trailing starts at T-1.
enum class Spacing { linspace, leading, trailing };
// model_default: the spacing's own sigmas. karras (arXiv 2206.00364, rho 7) and exponential
// (log-linear) respace sigma between the schedule's ends; sgm_uniform is ComfyUI's: timesteps
// evenly from T-1 towards 0 (the last short of 0), log sigma interpolated linearly between the
// integer timesteps around each (over diffusers' float32 sigmas: ComfyUI's own, from float64
// betas, are some 1e-7 apart). diffusers has no sgm_uniform; its docs map it to trailing spacing,
// which rounds the timesteps to integers and so differs from ComfyUI's by a fraction of a step.
enum class SigmaSchedule { model_default, karras, exponential, sgm_uniform };
// The families of diffusers schedulers, which lay out n steps each their own way.
enum class Grid {
  k_diffusion,  // Euler, Euler ancestral, Heun, DPM++ 2S a: n fractional timesteps
  dpm_solver,   // DPM-Solver++, UniPC: n of n+1 points, rounded
  ddim,         // n points, rounded; each step goes to t - T/n
  lcm,          // n of the 50 timesteps of the LCM distillation
};

// The scheduler_config.json fields the samplers read. Defaults are diffusers' where every
// scheduler agrees; spacing and set_alpha_to_one are per scheduler when the file does not say.
struct SchedulerConfig {
  int train_timesteps = 1000;
  BetaSchedule beta_schedule = BetaSchedule::linear;
  double beta_start = 0.0001;
  double beta_end = 0.02;
  Prediction prediction = Prediction::epsilon;
  std::optional<Spacing> spacing;
  int steps_offset = 0;
  std::optional<bool> set_alpha_to_one;  // DDIM's last step: to sigma 0, or to alphas_cumprod[0]'s

  bool operator==(const SchedulerConfig&) const = default;
};

// One inference step: the model is called at `timestep` on latents at noise level `sigma`, and
// the step leaves them at `next_sigma` (the next step's sigma, except for DDIM; 0 at the end).
struct ScheduleStep {
  double timestep;
  double sigma;
  double next_sigma;
};
using Schedule = std::vector<ScheduleStep>;

// alphas_cumprod[t] for t < train_timesteps, in float32 as diffusers holds it (its float32 betas).
std::vector<float> alphas_cumprod(const SchedulerConfig& config);
// The sigma of every training timestep, float32 as diffusers computes it.
std::vector<float> training_sigmas(std::span<const float> alphas_cumprod);
// Their logs, in float32 as numpy keeps the table sigma_to_timestep reads.
std::vector<float> log_sigma_table(std::span<const float> sigmas);
// The log-sigma table of a config's training timesteps: the three above in turn.
std::vector<float> training_log_sigmas(const SchedulerConfig& config);
// The fractional timestep of a noise level: linear interpolation of log sigma between the two
// training timesteps around it, clamped to the table's ends (diffusers' _sigma_to_t, k-diffusion's
// DiscreteSchedule.sigma_to_t). Maps the schedules' sigmas, and samplers' sigmas between steps, to
// the timesteps the UNet takes.
double sigma_to_timestep(double sigma, std::span<const float> log_sigmas);
// Its inverse: log sigma interpolated linearly between the integer timesteps around `timestep`
// (k-diffusion's DiscreteSchedule.t_to_sigma), clamped to the table's ends.
double timestep_to_sigma(double timestep, std::span<const float> log_sigmas);

// `steps` inference steps of `grid`'s family under `sigmas`; fails on a combination diffusers has
// no schedule for (DDIM and LCM take only their own sigmas).
Schedule make_schedule(const SchedulerConfig& config, Grid grid, SigmaSchedule sigmas, int steps);

// The names users and scheduler_config.json give them; fail listing the known ones.
Spacing parse_spacing(std::string_view name);
SigmaSchedule parse_sigma_schedule(std::string_view name);
BetaSchedule parse_beta_schedule(std::string_view name);
Prediction parse_prediction(std::string_view name);

}  // namespace rf::stable_diffusion
