// Row-wise softmax, in place.
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/support/kernels.h"
#include "backend/gpu/common/reduce.cuh"

namespace rf::gpu::test {

namespace {

constexpr int kThreads = 256;

// One block per row, in the CPU reference's steps: subtract the max, exponentiate, scale by 1/sum.
__global__ void __launch_bounds__(kThreads) softmax_kernel(float* x, int n) {
  float* row = x + static_cast<std::size_t>(blockIdx.x) * n;
  float max = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) max = fmaxf(max, row[i]);
  max = block_max<kThreads>(max);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float e = expf(row[i] - max);
    row[i] = e;
    sum += e;
  }
  const float inv = 1.0f / block_sum<kThreads>(sum);
  for (int i = threadIdx.x; i < n; i += kThreads) row[i] *= inv;
}

}  // namespace

void launch_softmax(float* x, int rows, int n, const DeviceContext& ctx) {
  require(rows >= 0 && n > 0, "launch_softmax", "empty rows or negative row count");
  if (rows == 0) return;
  softmax_kernel<<<rows, kThreads, 0, ctx.stream()>>>(x, n);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu::test
