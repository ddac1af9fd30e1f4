#include "models/stable_diffusion/schedule.h"

#include <algorithm>
#include <cmath>

#include "models/stable_diffusion/names.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// numpy.linspace: start + i * step, the last point exactly `stop`.
std::vector<double> linspace(double start, double stop, int count) {
  std::vector<double> out(count);
  const double step = count > 1 ? (stop - start) / (count - 1) : 0.0;
  for (int i = 0; i < count; ++i) out[i] = start + i * step;
  if (count > 1) out.back() = stop;
  return out;
}

// torch.linspace in float32: from the start up to half way, from the end after it, each point one
// fused multiply-add (torch's vectorised kernel).
std::vector<float> torch_linspace(float start, float end, int count) {
  std::vector<float> out(count);
  const float step = (end - start) / static_cast<float>(count - 1);
  for (int i = 0; i < count; ++i) {
    out[i] = i < count / 2 ? std::fma(step, static_cast<float>(i), start)
                           : std::fma(-step, static_cast<float>(count - 1 - i), end);
  }
  return out;
}

// numpy.interp over integer abscissae 0..n-1.
double interpolate(std::span<const float> table, double t) {
  if (t <= 0) return table.front();
  const auto last = static_cast<double>(table.size() - 1);
  if (t >= last) return table.back();
  const auto low = static_cast<std::size_t>(t);
  const double slope = static_cast<double>(table[low + 1]) - table[low];
  return slope * (t - static_cast<double>(low)) + table[low];
}

// What each family of diffusers schedulers spaces by when the config does not say.
Spacing default_spacing(Grid grid) { return grid == Grid::ddim ? Spacing::leading : Spacing::linspace; }

// Descending timesteps. `points` evenly placed ones of which the first `steps` are kept (DPM-Solver
// lays out steps + 1 and drops the 0); `round`: linspace rounds to integers (not k-diffusion's).
std::vector<double> spaced_timesteps(const SchedulerConfig& config, Spacing spacing, int steps, int points, bool round) {
  const int T = config.train_timesteps;
  std::vector<double> out;
  if (spacing == Spacing::trailing) {
    const double ratio = static_cast<double>(T) / steps;
    for (int i = 0; i < steps; ++i) out.push_back(std::nearbyint(T - i * ratio) - 1);
    return out;
  }
  std::vector<double> ascending;
  if (spacing == Spacing::linspace) {
    ascending = linspace(0, T - 1, points);
    for (double& t : ascending) t = round ? std::nearbyint(t) : static_cast<float>(t);
  } else {
    for (int i = 0; i < points; ++i) ascending.push_back(static_cast<double>(i) * (T / points) + config.steps_offset);
  }
  out.assign(ascending.rbegin(), ascending.rbegin() + steps);
  return out;
}

// LCM's: the distillation's 50 timesteps (k - 1, 2k - 1, ..., T - 1), `steps` of them from the top.
std::vector<double> lcm_timesteps(const SchedulerConfig& config, int steps) {
  constexpr int distilled = 50;
  const int k = config.train_timesteps / distilled;
  std::vector<double> out;
  for (double index : linspace(0, distilled, steps + 1)) {
    if (out.size() == static_cast<std::size_t>(steps)) break;
    out.push_back((distilled - std::floor(index)) * k - 1);
  }
  return out;
}

std::vector<double> respaced_sigmas(SigmaSchedule schedule, double sigma_max, double sigma_min, int steps) {
  std::vector<double> out;
  if (schedule == SigmaSchedule::karras) {
    constexpr double rho = 7.0;
    const double max_inv = std::pow(sigma_max, 1 / rho), min_inv = std::pow(sigma_min, 1 / rho);
    for (double ramp : linspace(0, 1, steps)) out.push_back(std::pow(max_inv + ramp * (min_inv - max_inv), rho));
  } else {
    for (double log_sigma : linspace(std::log(sigma_max), std::log(sigma_min), steps)) out.push_back(std::exp(log_sigma));
  }
  return out;
}

// ComfyUI's sgm_uniform: timesteps from T-1 down in `steps` equal parts (0 itself left out), sigma
// by linear interpolation of log sigma between the integer timesteps around each.
std::vector<double> sgm_uniform_sigmas(std::span<const float> log_sigmas, int steps) {
  std::vector<double> out;
  const auto top = static_cast<double>(log_sigmas.size() - 1);
  for (int i = 0; i < steps; ++i) out.push_back(timestep_to_sigma(top - i * top / steps, log_sigmas));
  return out;
}

// DDIM steps from t to t - T/n, whatever the next timestep is, and past 0 to alpha 1 or alphas_cumprod[0].
Schedule ddim_schedule(const SchedulerConfig& config, std::span<const float> sigmas, const std::vector<double>& timesteps) {
  const int stride = config.train_timesteps / static_cast<int>(timesteps.size());
  const double final_sigma = config.set_alpha_to_one.value_or(true) ? 0.0 : sigmas[0];
  Schedule out;
  for (double t : timesteps) {
    const int previous = static_cast<int>(t) - stride;
    out.push_back({t, sigmas[static_cast<std::size_t>(t)], previous >= 0 ? sigmas[previous] : final_sigma});
  }
  return out;
}

// Each step to the next one's sigma, the last to 0.
Schedule chained(const std::vector<double>& timesteps, const std::vector<double>& sigmas) {
  Schedule out;
  for (std::size_t i = 0; i < timesteps.size(); ++i) {
    out.push_back({timesteps[i], sigmas[i], i + 1 < sigmas.size() ? sigmas[i + 1] : 0.0});
  }
  return out;
}

}  // namespace

std::vector<float> alphas_cumprod(const SchedulerConfig& config) {
  const int T = config.train_timesteps;
  if (T < 2) fail("num_train_timesteps must be at least 2, got {}", T);
  std::vector<float> betas;
  if (config.beta_schedule == BetaSchedule::linear) {
    betas = torch_linspace(static_cast<float>(config.beta_start), static_cast<float>(config.beta_end), T);
  } else {
    betas = torch_linspace(static_cast<float>(std::sqrt(config.beta_start)), static_cast<float>(std::sqrt(config.beta_end)), T);
    for (float& b : betas) b = b * b;
  }
  // torch.cumprod accumulates float32 in double on the CPU.
  std::vector<float> out(T);
  double product = 1.0;
  for (int t = 0; t < T; ++t) out[t] = static_cast<float>(product *= 1.0f - betas[t]);
  return out;
}

std::vector<float> training_sigmas(std::span<const float> alphas_cumprod) {
  std::vector<float> out;
  for (float a : alphas_cumprod) out.push_back(std::sqrt((1.0f - a) / a));
  return out;
}

std::vector<float> log_sigma_table(std::span<const float> sigmas) {
  std::vector<float> out;
  for (float s : sigmas) out.push_back(std::log(s));
  return out;
}

double sigma_to_timestep(double sigma, std::span<const float> log_sigmas) {
  const double log_sigma = std::log(std::max(sigma, 1e-10));
  std::size_t low = 0;
  while (low + 2 < log_sigmas.size() && log_sigmas[low + 1] <= log_sigma) ++low;
  const float lo = log_sigmas[low], hi = log_sigmas[low + 1];
  const double w = std::clamp((lo - log_sigma) / static_cast<double>(lo - hi), 0.0, 1.0);
  return (1 - w) * static_cast<double>(low) + w * static_cast<double>(low + 1);
}

std::vector<float> training_log_sigmas(const SchedulerConfig& config) {
  return log_sigma_table(training_sigmas(alphas_cumprod(config)));
}

double timestep_to_sigma(double timestep, std::span<const float> log_sigmas) {
  return std::exp(interpolate(log_sigmas, timestep));
}

Schedule make_schedule(const SchedulerConfig& config, Grid grid, SigmaSchedule schedule, int steps) {
  if (steps < 1 || steps > config.train_timesteps) fail("steps must be between 1 and {}, got {}", config.train_timesteps, steps);
  const bool respaced = schedule != SigmaSchedule::model_default;
  if (respaced && (grid == Grid::ddim || grid == Grid::lcm)) fail("DDIM and LCM take only their model's own sigma schedule");
  const auto table = training_sigmas(alphas_cumprod(config));
  const Spacing spacing = config.spacing.value_or(default_spacing(grid));
  if (grid == Grid::lcm) {
    const auto timesteps = lcm_timesteps(config, steps);
    std::vector<double> sigmas;
    for (double t : timesteps) sigmas.push_back(table[static_cast<std::size_t>(t)]);
    return chained(timesteps, sigmas);
  }
  const bool k_diffusion = grid == Grid::k_diffusion;
  auto timesteps = spaced_timesteps(config, spacing, steps, k_diffusion || grid == Grid::ddim ? steps : steps + 1, !k_diffusion);
  if (grid == Grid::ddim) return ddim_schedule(config, table, timesteps);

  const std::vector<float> logs = log_sigma_table(table);
  std::vector<double> sigmas;
  if (schedule == SigmaSchedule::sgm_uniform) {
    sigmas = sgm_uniform_sigmas(logs, steps);
  } else if (respaced) {
    // k-diffusion's ends are the spaced timesteps' sigmas; DPM-Solver's the training table's.
    const double sigma_max = k_diffusion ? interpolate(table, timesteps.front()) : table.back();
    const double sigma_min = k_diffusion ? interpolate(table, timesteps.back()) : table.front();
    sigmas = respaced_sigmas(schedule, sigma_max, sigma_min, steps);
  } else {
    for (double t : timesteps) sigmas.push_back(interpolate(table, t));
    return chained(timesteps, sigmas);
  }
  for (std::size_t i = 0; i < sigmas.size(); ++i) {
    const double t = sigma_to_timestep(sigmas[i], logs);
    // DPM-Solver rounds Karras timesteps and truncates exponential ones (its int64 cast).
    const bool integral = grid == Grid::dpm_solver && schedule != SigmaSchedule::sgm_uniform;
    timesteps[i] = !integral ? static_cast<float>(t) : schedule == SigmaSchedule::karras ? std::nearbyint(t) : std::trunc(t);
  }
  return chained(timesteps, sigmas);
}

Spacing parse_spacing(std::string_view name) {
  static constexpr std::pair<std::string_view, Spacing> names[] = {
      {"linspace", Spacing::linspace}, {"leading", Spacing::leading}, {"trailing", Spacing::trailing}};
  return parse_name("timestep spacing", name, names);
}

SigmaSchedule parse_sigma_schedule(std::string_view name) {
  static constexpr std::pair<std::string_view, SigmaSchedule> names[] = {{"default", SigmaSchedule::model_default},
                                                                         {"karras", SigmaSchedule::karras},
                                                                         {"exponential", SigmaSchedule::exponential},
                                                                         {"sgm_uniform", SigmaSchedule::sgm_uniform}};
  return parse_name("sigma schedule", name, names);
}

BetaSchedule parse_beta_schedule(std::string_view name) {
  static constexpr std::pair<std::string_view, BetaSchedule> names[] = {{"linear", BetaSchedule::linear},
                                                                        {"scaled_linear", BetaSchedule::scaled_linear}};
  return parse_name("beta schedule", name, names);
}

Prediction parse_prediction(std::string_view name) {
  static constexpr std::pair<std::string_view, Prediction> names[] = {{"epsilon", Prediction::epsilon},
                                                                      {"v_prediction", Prediction::v}};
  return parse_name("prediction type", name, names);
}

}  // namespace rf::stable_diffusion
