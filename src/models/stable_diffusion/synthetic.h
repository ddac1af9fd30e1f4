#pragma once
// Stable Diffusion models at the published sizes with random weights, for benchmarks: no checkpoint
// can be downloaded where the speed is measured, and speed does not depend on the weights' values.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "formats/tensor.h"
#include "models/stable_diffusion/config.h"

namespace rf {
class ThreadPool;
}

namespace rf::stable_diffusion {

// The configs of runwayml/stable-diffusion-v1-5 ("sd15") and stabilityai/stable-diffusion-xl-base-1.0
// ("sdxl") as published; fails naming the known ones.
PipelineConfig published_config(std::string_view name);

// Every weight the config implies, f16, uniform with a variance of 1/fan-in (norm scales 1), so that
// activations keep the scale of a trained model's.
struct SyntheticWeights {
  PipelineConfig config;
  TensorSet unet{"synthetic UNet"}, vae{"synthetic VAE"}, text_encoder{"synthetic text encoder"};
  std::optional<TensorSet> text_encoder_2;
  std::vector<std::vector<std::uint16_t>> storage;  // what the views point into
};
void make_synthetic_weights(SyntheticWeights& out, const PipelineConfig& config, ThreadPool& pool, std::uint64_t seed);

}  // namespace rf::stable_diffusion
