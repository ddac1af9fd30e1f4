// A sparse layer's output (moe.h): each token's experts' rows, weighted and added in expert order, as
// the CPU backend adds them.
#include <algorithm>

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/moe/moe.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;

// Block (t, column chunk): token t's values of that chunk.
__global__ void __launch_bounds__(kThreads) combine_kernel(const float* expert_out, ExpertRoutes routes, int k,
                                                           int width, float* out) {
  begin_dependent();
  const int t = static_cast<int>(blockIdx.y);
  const int c = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (c >= width) return;
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    const int entry = routes.entry_of[t * k + j];
    sum += routes.weight[entry] * expert_out[static_cast<std::size_t>(entry) * width + c];
  }
  out[static_cast<std::size_t>(t) * width + c] = sum;
}

}  // namespace

void launch_moe_combine(const float* expert_out, ExpertRoutes routes, int n_tokens, int k, int width, float* out,
                        const DeviceContext& ctx) {
  require(n_tokens >= 0 && n_tokens < 65536 && k > 0 && width > 0, "launch_moe_combine", "bad token count or width");
  if (n_tokens == 0) return;
  const dim3 grid((width + kThreads - 1) / kThreads, n_tokens);
  launch_dependent(combine_kernel, grid, kThreads, 0, ctx, expert_out, routes, k, width, out);
}

}  // namespace rf::gpu
