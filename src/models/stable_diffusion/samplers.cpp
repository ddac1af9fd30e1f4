#include "models/stable_diffusion/samplers.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "models/stable_diffusion/names.h"
#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// Every sampler's update is a weighted sum of a few tensors (latents, model output, earlier
// predictions, noise) with weights that depend on the noise levels alone.
struct Term {
  double weight;
  std::span<const float> values;
};

// out = sum of weight * values, element by element (out may be one of the values). Terms of
// weight 0 are skipped, so their values may be empty.
void combine(std::span<float> out, std::initializer_list<Term> terms) {
  std::vector<Term> used;
  for (const Term& t : terms) {
    if (t.weight != 0) used.push_back(t);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    double sum = 0;
    for (const Term& t : used) sum += t.weight * t.values[i];
    out[i] = static_cast<float>(sum);
  }
}

// DPM-Solver's half log signal-to-noise ratio, lambda = log(alpha / sigma_vp) = -log(sigma).
double lambda(double sigma) { return -std::log(sigma); }

// Variance-preserving alpha and sigma_vp at k-diffusion's sigma.
double alpha_of(double sigma) { return 1 / std::sqrt(sigma * sigma + 1); }
double sigma_vp_of(double sigma) { return sigma * alpha_of(sigma); }

// The denoised latents x0 and the noise, each a linear function of the latents x and the model's
// output m at noise level sigma: x0 = x0_x * x + x0_m * m, noise = noise_x * x + noise_m * m.
struct Predicted {
  double x0_x, x0_m, noise_x, noise_m;
};

// Variance-preserving latents (alpha x0 + sigma_vp noise); variance-exploding ones (x0 + sigma
// noise) are these divided by alpha, so their x weights are alpha times larger.
Predicted predicted(Prediction prediction, double sigma, bool variance_exploding) {
  const double alpha = alpha_of(sigma), sigma_vp = sigma_vp_of(sigma);
  Predicted p = prediction == Prediction::epsilon ? Predicted{1 / alpha, -sigma, 0, 1}
                                                  : Predicted{alpha, -sigma_vp, sigma_vp, alpha};
  if (variance_exploding) {
    p.x0_x *= alpha;
    p.noise_x *= alpha;
  }
  return p;
}

// Euler, Euler ancestral and Heun: latents at x0 + sigma * noise, the model fed x / sqrt(sigma^2 + 1).
class KDiffusionSampler : public Sampler {
 protected:
  using Sampler::Sampler;
  bool variance_exploding() const override { return true; }

  // The model's noise estimate for latents x at step i's timestep and sigma, into out: the
  // derivative dx/dsigma of the probability-flow ODE.
  void estimate_noise(const Model& model, int i, std::span<const float> x, std::span<float> out) {
    const double sigma = schedule_[i].sigma;
    call_model(model, i, x, alpha_of(sigma));
    const Predicted p = predicted(prediction_, sigma, true);
    combine(out, {{p.noise_x, x}, {p.noise_m, model_output_}});
  }

  std::vector<float> derivative_;
};

class Euler final : public KDiffusionSampler {
 public:
  Euler(Schedule schedule, Prediction prediction, double init, bool ancestral)
      : KDiffusionSampler(std::move(schedule), prediction, init), ancestral_(ancestral) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource& noise) override {
    const auto [timestep, sigma, next] = schedule_[i];
    derivative_.resize(x.size());
    estimate_noise(model, i, x, derivative_);
    if (!ancestral_) {
      combine(x, {{1, x}, {next - sigma, derivative_}});
      return;
    }
    // Down to sigma_down deterministically, then fresh noise of sigma_up (sigma_down^2 + sigma_up^2 = next^2).
    const double up = std::sqrt(next * next * (sigma * sigma - next * next) / (sigma * sigma));
    const double down = std::sqrt(next * next - up * up);
    draw(noise, x.size());
    combine(x, {{1, x}, {down - sigma, derivative_}, {up, noise_}});
  }

  bool ancestral_;
};

// Heun's second-order method: an Euler step to the next sigma, then the step again with the mean
// of the derivatives at both ends. The last step is Euler's alone, as in diffusers (and k-diffusion,
// whose last sigma is 0).
class Heun final : public KDiffusionSampler {
 public:
  Heun(Schedule schedule, Prediction prediction, double init) : KDiffusionSampler(std::move(schedule), prediction, init) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource&) override {
    const auto [timestep, sigma, next] = schedule_[i];
    derivative_.resize(x.size());
    estimate_noise(model, i, x, derivative_);
    const double dt = next - sigma;
    if (i + 1 == steps()) {
      combine(x, {{1, x}, {dt, derivative_}});
      return;
    }
    euler_.resize(x.size());
    end_derivative_.resize(x.size());
    combine(euler_, {{1, x}, {dt, derivative_}});
    estimate_noise(model, i + 1, euler_, end_derivative_);  // the next step's timestep and sigma
    combine(x, {{1, x}, {dt / 2, derivative_}, {dt / 2, end_derivative_}});
  }

  std::vector<float> euler_, end_derivative_;
};

// DPM++ 2S ancestral with the UNet as its denoiser. Its midpoint sigmas lie between the schedule's,
// so the model runs there at the timestep log sigma interpolates to, as k-diffusion's does; at the
// step's own sigma, at the schedule's timestep, as Euler's and Heun's.
class DpmSolver2SAncestral final : public KDiffusionSampler {
 public:
  DpmSolver2SAncestral(Schedule schedule, Prediction prediction, double init, std::vector<float> log_sigmas)
      : KDiffusionSampler(std::move(schedule), prediction, init), log_sigmas_(std::move(log_sigmas)) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource& noise) override {
    const auto [timestep, sigma, next] = schedule_[i];
    // Captured by value, named: clang 15 cannot capture a structured binding.
    const Denoiser denoise = [&, timestep = timestep, sigma = sigma](std::span<const float> in, double level,
                                                                     std::span<float> out) {
      run_model(model, level == sigma ? timestep : sigma_to_timestep(level, log_sigmas_), in, alpha_of(level));
      const Predicted p = predicted(prediction_, level, true);
      combine(out, {{p.x0_x, in}, {p.x0_m, model_output_}});
    };
    // A1111 and k-diffusion default to eta 1 (and s_noise 1, leaving the noise as drawn).
    dpmpp_2s_ancestral_step(x, sigma, next, 1.0, denoise, noise);
  }

  std::vector<float> log_sigmas_;
};

// The variance-preserving samplers: latents alpha x0 + sigma_vp noise, fed to the model as they are.
class VpSampler : public Sampler {
 protected:
  using Sampler::Sampler;
  bool variance_exploding() const override { return false; }

  // The model's prediction at step i turned into x0, into out.
  void predict_x0(const Model& model, int i, std::span<const float> x, std::span<float> out) {
    call_model(model, i, x, 1.0);
    const Predicted p = predicted(prediction_, schedule_[i].sigma, false);
    combine(out, {{p.x0_x, x}, {p.x0_m, model_output_}});
  }
};

// DPM-Solver++(2M) (arXiv 2211.01095) in diffusers' data-prediction form; with `sde`, its stochastic
// variant, which decays the latents by exp(-h) more and adds the lost variance back as noise. The
// first step, and the last (to sigma 0), are first order.
class DpmSolverPlusPlus final : public VpSampler {
 public:
  DpmSolverPlusPlus(Schedule schedule, Prediction prediction, bool sde)
      : VpSampler(std::move(schedule), prediction, 1.0), sde_(sde) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource& noise) override {
    const auto [timestep, sigma, next] = schedule_[i];
    x0_.resize(x.size());
    predict_x0(model, i, x, x0_);
    const double alpha_t = alpha_of(next), sigma_t = sigma_vp_of(next), sigma_s = sigma_vp_of(sigma);
    const double h = lambda(next) - lambda(sigma);
    const double decay = sde_ ? std::exp(-h) : 1.0;
    const double gain = -alpha_t * std::expm1(sde_ ? -2 * h : -h);  // on x0
    const double noise_weight = sde_ ? sigma_t * std::sqrt(-std::expm1(-2 * h)) : 0.0;
    if (sde_) draw(noise, x.size());
    const bool first_order = i == 0 || i + 1 == steps();
    // Second order: x0 extrapolated along lambda to the interval's midpoint, x0 + (x0 - x0_prev) / (2 r).
    const double r = first_order ? 1.0 : (lambda(sigma) - lambda(schedule_[i - 1].sigma)) / h;
    const double slope = first_order ? 0.0 : gain / (2 * r);
    previous_x0_.resize(x.size());
    combine(x, {{sigma_t / sigma_s * decay, x}, {gain + slope, x0_}, {-slope, previous_x0_}, {noise_weight, noise_}});
    std::swap(x0_, previous_x0_);
  }

  bool sde_;
  std::vector<float> x0_, previous_x0_;
};

// UniPC (arXiv 2302.04867) as diffusers runs it: B(h) = expm1(-h) ("bh2"), order 2 predicting x0.
// Each step first corrects the latents the last step predicted with the model's new output
// (UniC), then predicts the next ones (UniP); order 1 for the first and the last step.
class UniPc final : public VpSampler {
 public:
  UniPc(Schedule schedule, Prediction prediction) : VpSampler(std::move(schedule), prediction, 1.0) {}

 private:
  // The weights both updates share, from level `from` to level `to`, h apart in lambda.
  struct Interval {
    double h;
    double ratio;  // sigma_vp(to) / sigma_vp(from): the latents' weight
    double phi;    // alpha(to) * expm1(-h): minus x0's weight at `from`, and (bh2) the slopes' scale
  };
  static Interval interval(double from, double to) {
    const double h = lambda(to) - lambda(from);
    return {h, sigma_vp_of(to) / sigma_vp_of(from), alpha_of(to) * std::expm1(-h)};
  }

  void advance(int i, std::span<float> x, const Model& model, NoiseSource&) override {
    x0_.resize(x.size());
    predict_x0(model, i, x, x0_);
    if (i > 0) correct(i, x);
    // Order 2 once there is an earlier prediction, order 1 on the last step.
    const int order = std::min({2, steps() - i, i + 1});
    last_sample_.assign(x.begin(), x.end());
    const double sigma = schedule_[i].sigma;
    const Interval step = interval(sigma, schedule_[i].next_sigma);
    // x0's slope in lambda from the previous prediction, with the predictor's weight rho = 1/2.
    const double d = order == 2 ? step.phi * 0.5 / ((lambda(schedule_[i - 1].sigma) - lambda(sigma)) / step.h) : 0.0;
    previous_.resize(x.size());
    combine(x, {{step.ratio, x}, {-step.phi + d, x0_}, {-d, previous_}});
    std::swap(before_previous_, previous_);
    std::swap(previous_, x0_);
    order_ = order;
  }

  // UniC: the last step's prediction redone with this step's x0 as well, at the order it used.
  void correct(int i, std::span<float> x) {
    const double from = schedule_[i - 1].sigma;
    const Interval step = interval(from, schedule_[i].sigma);
    const double hh = -step.h, b_h = std::expm1(hh);
    // b_k = k! * h phi_{k+1}(hh) / B(h), with the recursion h phi_{k+1} = h phi_k / hh - 1 / k!.
    const double phi_2 = b_h / hh - 1, phi_3 = phi_2 / hh - 0.5;
    const double b1 = phi_2 / b_h, b2 = phi_3 * 2 / b_h;
    double rho_prev = 0, rho_now = 0.5, r = 1;
    if (order_ == 2) {
      // Solve [[1, 1], [r, 1]] rho = [b1, b2] for the weights of the two slopes.
      r = (lambda(schedule_[i - 2].sigma) - lambda(from)) / step.h;
      rho_prev = (b1 - b2) / (1 - r);
      rho_now = (b2 - r * b1) / (1 - r);
    }
    const double prev_weight = step.phi * rho_prev / r;
    combine(x, {{step.ratio, last_sample_},
                {-step.phi + step.phi * rho_now + prev_weight, previous_},
                {-prev_weight, before_previous_},
                {-step.phi * rho_now, x0_}});
  }

  std::vector<float> x0_, previous_, before_previous_, last_sample_;
  int order_ = 1;
};

// DDIM (arXiv 2010.02502): to x0 at the target level plus the predicted noise's direction, with
// eta times the DDPM posterior's deviation as fresh noise.
class Ddim final : public VpSampler {
 public:
  Ddim(Schedule schedule, Prediction prediction, double eta) : VpSampler(std::move(schedule), prediction, 1.0), eta_(eta) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource& noise) override {
    const auto [timestep, sigma, next] = schedule_[i];
    call_model(model, i, x, 1.0);
    const Predicted p = predicted(prediction_, sigma, false);
    const double a_t = alpha_of(sigma) * alpha_of(sigma), a_next = alpha_of(next) * alpha_of(next);
    const double deviation = eta_ * std::sqrt((1 - a_next) / (1 - a_t) * (1 - a_t / a_next));
    const double direction = std::sqrt(1 - a_next - deviation * deviation), scale = std::sqrt(a_next);
    if (eta_ > 0) draw(noise, x.size());
    combine(x, {{scale * p.x0_x + direction * p.noise_x, x},
                {scale * p.x0_m + direction * p.noise_m, model_output_},
                {deviation, noise_}});
  }

  double eta_;
};

// Latent Consistency Models (arXiv 2310.04378): the consistency function's boundary-condition mix of
// the latents and x0, then noised afresh to the next timestep (not after the last).
class Lcm final : public VpSampler {
 public:
  Lcm(Schedule schedule, Prediction prediction) : VpSampler(std::move(schedule), prediction, 1.0) {}

 private:
  void advance(int i, std::span<float> x, const Model& model, NoiseSource& noise) override {
    const auto [timestep, sigma, next] = schedule_[i];
    call_model(model, i, x, 1.0);
    const Predicted p = predicted(prediction_, sigma, false);
    constexpr double sigma_data = 0.5, timestep_scaling = 10;
    const double scaled = timestep * timestep_scaling;
    const double c_skip = sigma_data * sigma_data / (scaled * scaled + sigma_data * sigma_data);
    const double c_out = scaled / std::sqrt(scaled * scaled + sigma_data * sigma_data);
    const bool last = i + 1 == steps();
    const double keep = last ? 1.0 : alpha_of(next);
    if (!last) draw(noise, x.size());
    combine(x, {{keep * (c_skip + c_out * p.x0_x), x},
                {keep * c_out * p.x0_m, model_output_},
                {last ? 0.0 : sigma_vp_of(next), noise_}});
  }
};

}  // namespace

Sampler::Sampler(Schedule schedule, Prediction prediction, double init_noise_sigma)
    : schedule_(std::move(schedule)), prediction_(prediction), init_noise_sigma_(init_noise_sigma) {}

void Sampler::step(int i, std::span<float> latents, const Model& model, NoiseSource& noise) {
  if (i != next_step_) fail("sampler steps run in order: expected step {}, got {}", next_step_, i);
  advance(i, latents, model, noise);
  ++next_step_;
}

void Sampler::add_noise(std::span<const float> x0, std::span<const float> noise, double sigma,
                        std::span<float> out) const {
  const auto x0_weight = static_cast<float>(variance_exploding() ? 1.0 : alpha_of(sigma));
  const auto noise_weight = static_cast<float>(variance_exploding() ? sigma : sigma_vp_of(sigma));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = x0_weight * x0[i] + noise_weight * noise[i];
}

void Sampler::call_model(const Model& model, int i, std::span<const float> x, double input_scale) {
  run_model(model, schedule_[i].timestep, x, input_scale);
}

void Sampler::run_model(const Model& model, double timestep, std::span<const float> x, double input_scale) {
  model_output_.resize(x.size());
  if (input_scale == 1.0) {
    model(x, timestep, model_output_);
    return;
  }
  model_input_.resize(x.size());
  const auto scale = static_cast<float>(input_scale);
  for (std::size_t k = 0; k < x.size(); ++k) model_input_[k] = x[k] * scale;
  model(model_input_, timestep, model_output_);
}

void Sampler::draw(NoiseSource& noise, std::size_t size) {
  noise_.resize(size);
  noise.randn(noise_);
}

std::unique_ptr<Sampler> make_sampler(const SchedulerConfig& config, const SamplerOptions& options) {
  if (options.first_step < 0 || options.first_step >= options.steps) {
    fail("the first step {} is outside the {} steps", options.first_step, options.steps);
  }
  const auto schedule = [&](Grid grid) {
    Schedule s = make_schedule(config, grid, options.sigmas, options.steps);
    s.erase(s.begin(), s.begin() + options.first_step);
    return s;
  };
  switch (options.kind) {
    case SamplerKind::euler:
    case SamplerKind::euler_ancestral:
    case SamplerKind::heun:
    case SamplerKind::dpmpp_2s_ancestral: {
      Schedule s = schedule(Grid::k_diffusion);
      // diffusers starts leading-spaced schedules at unit variance over the top sigma's.
      const double top = s.front().sigma;
      const double init = config.spacing == Spacing::leading ? std::sqrt(top * top + 1) : top;
      if (options.kind == SamplerKind::heun) return std::make_unique<Heun>(std::move(s), config.prediction, init);
      if (options.kind == SamplerKind::dpmpp_2s_ancestral) {
        return std::make_unique<DpmSolver2SAncestral>(std::move(s), config.prediction, init,
                                                      training_log_sigmas(config));
      }
      return std::make_unique<Euler>(std::move(s), config.prediction, init, options.kind == SamplerKind::euler_ancestral);
    }
    case SamplerKind::dpmpp_2m:
    case SamplerKind::dpmpp_2m_sde:
      return std::make_unique<DpmSolverPlusPlus>(schedule(Grid::dpm_solver), config.prediction,
                                                 options.kind == SamplerKind::dpmpp_2m_sde);
    case SamplerKind::unipc:
      return std::make_unique<UniPc>(schedule(Grid::dpm_solver), config.prediction);
    case SamplerKind::ddim:
      if (options.eta < 0) fail("DDIM's eta must be >= 0, got {}", options.eta);
      return std::make_unique<Ddim>(schedule(Grid::ddim), config.prediction, options.eta);
    case SamplerKind::lcm:
      return std::make_unique<Lcm>(schedule(Grid::lcm), config.prediction);
  }
  fail("unknown sampler kind");
}

void dpmpp_2s_ancestral_step(std::span<float> x, double sigma, double next, double eta, const Denoiser& denoise,
                             NoiseSource& noise) {
  std::vector<float> denoised(x.size());
  denoise(x, sigma, denoised);
  const double up = std::min(next, eta * std::sqrt(next * next * (sigma * sigma - next * next) / (sigma * sigma)));
  const double down = std::sqrt(next * next - up * up);
  if (down == 0) {
    std::ranges::copy(denoised, x.begin());  // Euler's step to sigma 0 lands on the denoised latents
  } else {
    // In lambda = -log(sigma), h from sigma to sigma_down: x0 predicted at the midpoint lambda + h/2
    // by a first-order step there, then the whole step taken with that x0.
    const double h = lambda(down) - lambda(sigma), mid = std::exp(-(lambda(sigma) + h / 2));
    std::vector<float> midpoint(x.size());
    combine(midpoint, {{mid / sigma, x}, {-std::expm1(-h / 2), denoised}});
    denoise(midpoint, mid, denoised);
    combine(x, {{down / sigma, x}, {-std::expm1(-h), denoised}});
  }
  // k-diffusion draws the noise after the denoiser calls, on every step but those to sigma 0.
  if (next == 0) return;
  std::vector<float> fresh(x.size());
  noise.randn(fresh);
  combine(x, {{1, x}, {up, fresh}});
}

SamplerKind parse_sampler(std::string_view name) { return parse_name("sampler", name, kSamplerNames); }

}  // namespace rf::stable_diffusion
