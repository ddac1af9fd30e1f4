#pragma once
// The embedding lookup (embedding.cu) and diffusion's timestep embedding (timestep_embedding.cu).
// Device pointers; asynchronous on the context's stream.
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// out[t] = row tokens[t] of `table`, decoded to fp32 (any stored type), times `scale` (Gemma's
// sqrt(hidden)). Token ids are the caller's to check, on the host, as the CPU backend does. With
// `previous`, a token previous_token(r) (model/batch.h) is previous[r]: a token sampled on the
// device and not yet seen by the host.
void launch_embedding(const WeightMatrix& table, const std::int32_t* tokens, int n_tokens, float* out,
                      const DeviceContext& ctx, const std::int32_t* previous = nullptr, float scale = 1.0f);

// The sinusoidal embedding of n timesteps, `dim` values each, as diffusers' get_timestep_embedding:
// frequencies max_period^(-i / (dim/2 - shift)); sin then cos, or cos then sin when flipped.
void launch_timestep_embedding(const float* timesteps, int n, int dim, bool flip_sin_to_cos,
                               float downscale_freq_shift, float max_period, float* y, const DeviceContext& ctx);

}  // namespace rf::gpu
