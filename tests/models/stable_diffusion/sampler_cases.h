#pragma once
// The fixture's cases for the samplers rocmforge ships, and how their recorded per-call lists map
// onto rocmforge's steps.
#include <string>
#include <vector>

#include "models/stable_diffusion/samplers.h"
#include "sampling_fixture.h"

namespace rf::stable_diffusion::fixture {

// diffusers' dpmpp_2s (DPMSolverSinglestep) and dpm2_a (KDPM2Ancestral) are recorded but not
// shipped: neither is A1111's DPM++ 2S a, the sampler the issue asks for.
inline bool shipped(const nlohmann::json& c) {
  const auto name = c["sampler"].get<std::string>();
  return name != "dpmpp_2s" && name != "dpm2_a";
}

inline std::vector<const nlohmann::json*> shipped_cases() {
  std::vector<const nlohmann::json*> out;
  for (const auto& c : sampling()["cases"]) {
    if (shipped(c)) out.push_back(&c);
  }
  return out;
}

inline std::unique_ptr<Sampler> make_case_sampler(const nlohmann::json& c) {
  SamplerOptions options;
  options.kind = parse_sampler(c["sampler"].get<std::string>());
  options.sigmas = sigma_schedule(c);
  options.steps = c["steps"].get<int>();
  if (!c["eta"].is_null()) options.eta = c["eta"].get<double>();
  return make_sampler(scheduler_config(c), options);
}

// diffusers' Heun calls step() twice a step but on the last, with the timesteps and sigmas
// repeated to match: rocmforge's step i is diffusers' call 2i + 1 (2i on the last step).
inline std::size_t diffusers_call(const nlohmann::json& c, int step, int steps) {
  if (c["sampler"] != "heun") return step;
  return step + 1 == steps ? 2 * step : 2 * step + 1;
}

}  // namespace rf::stable_diffusion::fixture
