// Schedules against diffusers' set_timesteps: alphas_cumprod, every shipped case's timesteps and
// sigmas, and init_noise_sigma, each within 1e-6 relative (diffusers rounds its sigmas to float32,
// 6e-8 relative; rocmforge keeps doubles).
#include "models/stable_diffusion/schedule.h"

#include "sampler_cases.h"

namespace rf::stable_diffusion {
namespace {

using fixture::sampling;

constexpr double kTolerance = 1e-6;

// The largest |a - b| / |b| (|a - b| where b is 0).
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double diff = std::abs(a[i] - b[i]);
    worst = std::max(worst, b[i] == 0 ? diff : diff / std::abs(b[i]));
  }
  return worst;
}

TEST(Schedule, AlphasCumprodAsDiffusers) {
  SchedulerConfig config;
  config.beta_schedule = BetaSchedule::scaled_linear;
  config.beta_start = 0.00085;
  config.beta_end = 0.012;
  // float32 both, torch's linspace and cumprod reproduced: equal bit for bit.
  const auto ours = alphas_cumprod(config);
  const auto theirs = fixture::floats(sampling()["alphas_cumprod"]["scaled_linear_0.00085_0.012_1000"]);
  ASSERT_EQ(ours.size(), theirs.size());
  fixture::check("scaled_linear 0.00085..0.012 alphas_cumprod",
                 relative_error({ours.begin(), ours.end()}, {theirs.begin(), theirs.end()}), 0.0);
}

// Heun repeats every timestep and sigma but the first (and the final sigma): entry i is diffusers' 2i - 1.
std::size_t diffusers_entry(const nlohmann::json& c, std::size_t i) {
  return c["sampler"] == "heun" && i > 0 ? 2 * i - 1 : i;
}

TEST(Schedule, TimestepsAndSigmasAsDiffusers) {
  for (const auto* c : fixture::shipped_cases()) {
    const auto sampler = fixture::make_case_sampler(*c);
    const Schedule& schedule = sampler->schedule();
    const auto& timesteps = (*c)["timesteps"];
    std::vector<double> ours_t, theirs_t, ours_s, theirs_s;
    for (std::size_t i = 0; i < schedule.size(); ++i) {
      ours_t.push_back(schedule[i].timestep);
      theirs_t.push_back(timesteps[diffusers_entry(*c, i)].get<double>());
    }
    const std::string name = (*c)["name"];
    ASSERT_EQ((*c)["sampler"] == "heun" ? 2 * schedule.size() - 1 : schedule.size(), timesteps.size()) << name;
    fixture::check(name + " timesteps", relative_error(ours_t, theirs_t), kTolerance);
    fixture::check(name + " init_noise_sigma",
                   relative_error({sampler->init_noise_sigma()}, {(*c)["init_noise_sigma"].get<double>()}), kTolerance);
    // DDIM and LCM keep alphas, not sigmas: their steps' levels are checked through the trajectories.
    if ((*c)["sigmas"].is_null()) continue;
    const auto& sigmas = (*c)["sigmas"];
    for (std::size_t i = 0; i < schedule.size(); ++i) {
      ours_s.push_back(schedule[i].sigma);
      theirs_s.push_back(sigmas[diffusers_entry(*c, i)].get<double>());
    }
    ours_s.push_back(schedule.back().next_sigma);
    theirs_s.push_back(sigmas.back().get<double>());
    fixture::check(name + " sigmas", relative_error(ours_s, theirs_s), kTolerance);
  }
}

TEST(Schedule, SigmaToTimestepInterpolatesLogSigma) {
  const auto sigmas = training_sigmas(alphas_cumprod(SchedulerConfig{}));
  const auto logs = log_sigma_table(sigmas);
  // A training sigma is its own timestep, and the geometric mean of two neighbours (the midpoint
  // in log sigma) lies half way between theirs.
  double worst = 0;
  for (const std::size_t t : {0, 1, 100, 500, 998}) {
    worst = std::max(worst, std::abs(sigma_to_timestep(sigmas[t], logs) - static_cast<double>(t)));
    const double between = std::sqrt(static_cast<double>(sigmas[t]) * sigmas[t + 1]);
    worst = std::max(worst, std::abs(sigma_to_timestep(between, logs) - (t + 0.5)));
  }
  fixture::check("timesteps of training sigmas and of their geometric means", worst, 1e-4);
  // Past the table's ends, its end timesteps.
  EXPECT_EQ(sigma_to_timestep(2 * sigmas.back(), logs), 999.0);
  EXPECT_EQ(sigma_to_timestep(sigmas.front() / 2, logs), 0.0);
}

TEST(Schedule, RefusesWhatDiffusersHasNoScheduleFor) {
  const SchedulerConfig config;
  EXPECT_THROW(make_schedule(config, Grid::ddim, SigmaSchedule::karras, 10), Error);
  EXPECT_THROW(make_schedule(config, Grid::lcm, SigmaSchedule::sgm_uniform, 4), Error);
  EXPECT_THROW(make_schedule(config, Grid::k_diffusion, SigmaSchedule::model_default, 0), Error);
  EXPECT_THROW(parse_sigma_schedule("normal"), Error);
}

}  // namespace
}  // namespace rf::stable_diffusion
