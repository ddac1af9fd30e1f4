#pragma once
// A lower bound of what a GPU backend holds to make a set of images, before loading anything onto a
// device: a dry run of the pipeline on a backend that computes only shapes (as ggml's measuring
// allocator sizes a graph), for `rocmforge info`; bench-image prints it beside the measured memory,
// which adds the kernels' scratch and the allocator's slack.
#include <cstddef>

#include "models/stable_diffusion/pipeline.h"

namespace rf::stable_diffusion {

struct MemoryEstimate {
  std::size_t weights = 0;      // as the GPU backend keeps them: 16-bit matrices stay 16-bit, f32 stays f32
  std::size_t activations = 0;  // the most fp32 activations alive at once, the kernels' scratch not counted
  std::size_t total() const { return weights + activations; }
};

// `options` are resolved by the pipeline first, so they may leave the model's defaults unset. The run
// costs host time only (shapes, and the sampler's arithmetic on zeros).
MemoryEstimate estimate_memory(const PipelineParts& parts, GenerationOptions options);

}  // namespace rf::stable_diffusion
