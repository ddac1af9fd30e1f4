// The sinusoidal timestep embedding of a diffusion model's UNet; twin of backend/cpu/image_ops.
#include "backend/gpu/embedding/embedding.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 128;

// Block t, frequency i: the same fp32 arithmetic as the CPU's (and diffusers'), accurate sin and cos
// (not the fast intrinsics: angles reach 1e3 radians).
__global__ void __launch_bounds__(kThreads) timestep_kernel(const float* timesteps, int dim, bool flip, float shift,
                                                            float log_max_period, float* y) {
  const int half = dim / 2;
  float* out = y + static_cast<std::size_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < half; i += kThreads) {
    const float angle = timesteps[blockIdx.x] * expf(-log_max_period * static_cast<float>(i) / (half - shift));
    out[flip ? i : half + i] = cosf(angle);
    out[flip ? half + i : i] = sinf(angle);
  }
  if (dim % 2 == 1 && threadIdx.x == 0) out[dim - 1] = 0.0f;
}

}  // namespace

void launch_timestep_embedding(const float* timesteps, int n, int dim, bool flip_sin_to_cos,
                               float downscale_freq_shift, float max_period, float* y, const DeviceContext& ctx) {
  require(n >= 0 && dim >= 2 && max_period > 0, "launch_timestep_embedding", "bad count, width or period");
  if (n == 0) return;
  launch_kernel(timestep_kernel, n, kThreads, 0, ctx.stream(), timesteps, dim, flip_sin_to_cos, downscale_freq_shift,
                                                    logf(max_period), y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
