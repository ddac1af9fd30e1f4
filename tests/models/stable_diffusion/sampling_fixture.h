#pragma once
// tests/fixtures/sd/sampling.json, made by tools/fixtures/make_sd_sampling_fixtures.py (its
// docstring describes the layout): torch's noise and diffusers' schedules and trajectories.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/stable_diffusion/config_json.h"
#include "models/stable_diffusion/noise.h"
#include "models/stable_diffusion/schedule.h"
#include "util/error.h"

namespace rf::stable_diffusion::fixture {

inline const nlohmann::json& sampling() {
  static const nlohmann::json doc = [] {
    const std::string path = std::string(ROCMFORGE_FIXTURES) + "/sd/sampling.json";
    std::ifstream in(path);
    if (!in) fail("missing fixture {}", path);
    return nlohmann::json::parse(in);
  }();
  return doc;
}

inline std::vector<float> floats(const nlohmann::json& values) { return values.get<std::vector<float>>(); }

inline std::size_t element_count(const nlohmann::json& shape) {
  std::size_t n = 1;
  for (const auto& d : shape) n *= d.get<std::size_t>();
  return n;
}

// The model's scheduler_config.json as the pipeline reads it, with the case's spacing override.
inline SchedulerConfig scheduler_config(const nlohmann::json& c) {
  const auto name = c["config"].get<std::string>();
  auto config = scheduler_config_from_json(sampling()["configs"][name], "sampling.json configs " + name);
  if (c["schedule"] == "trailing") config.spacing = Spacing::trailing;
  return config;
}

// trailing is a spacing; every other schedule name is a sigma schedule.
inline SigmaSchedule sigma_schedule(const nlohmann::json& c) {
  const auto name = c["schedule"].get<std::string>();
  return name == "trailing" ? SigmaSchedule::model_default : parse_sigma_schedule(name);
}

// The largest |a - b| over the largest |b|: an error relative to the tensor's scale.
inline double scaled_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// Prints one check's error against its tolerance, and fails the test past it.
inline void check(const std::string& what, double error, double tolerance) {
  fmt::print("  {:<52} error {:9.3g}  tolerance {:9.3g}{}\n", what, error, tolerance, error <= tolerance ? "" : "  FAIL");
  EXPECT_LE(error, tolerance) << what;
}

// Replays the noise a case recorded, in order.
class RecordedNoise final : public NoiseSource {
 public:
  explicit RecordedNoise(const nlohmann::json& tensors) : tensors_(tensors) {}
  void randn(std::span<float> out) override {
    if (next_ >= tensors_.size()) fail("the sampler drew more noise than diffusers ({} tensors)", tensors_.size());
    const auto values = floats(tensors_[next_++]);
    if (values.size() != out.size()) fail("noise of {} values asked, diffusers drew {}", out.size(), values.size());
    std::copy(values.begin(), values.end(), out.begin());
  }
  std::size_t drawn() const { return next_; }

 private:
  const nlohmann::json& tensors_;
  std::size_t next_ = 0;
};

}  // namespace rf::stable_diffusion::fixture
