// The kernels of the GPU's ceiling measurements.
#include "backend/gpu/common/philox.cuh"
#include "backend/gpu/probe/probe_kernels.h"
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kFillBlocks = 4096;

__global__ void __launch_bounds__(kThreads) read_all_kernel(const float4* data, std::size_t n, float* partial) {
  float sum = 0.0f;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float4 v = data[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  sum = block_sum<kThreads>(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__device__ float fill_value(std::size_t i) { return 2.0f * philox_uniform(1, 0, static_cast<unsigned>(i)) - 1.0f; }

__global__ void __launch_bounds__(kThreads) fill_kernel(float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) out[i] = fill_value(i);
}

__global__ void __launch_bounds__(kThreads) fill_bf16_kernel(std::uint16_t* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    out[i] = static_cast<std::uint16_t>(__float_as_uint(fill_value(i)) >> 16);  // bf16: the top half of an fp32
  }
}

}  // namespace

void launch_read_all(const float* data, std::size_t n, float* partial, unsigned blocks, const DeviceContext& ctx) {
  launch_kernel(read_all_kernel, blocks, kThreads, 0, ctx.stream(), reinterpret_cast<const float4*>(data), n / 4, partial);
  RF_GPU_CHECK_LAUNCH();
}

void launch_fill_random(float* out, std::size_t n, const DeviceContext& ctx) {
  launch_kernel(fill_kernel, kFillBlocks, kThreads, 0, ctx.stream(), out, n);
  RF_GPU_CHECK_LAUNCH();
}

void launch_fill_random_bf16(std::uint16_t* out, std::size_t n, const DeviceContext& ctx) {
  launch_kernel(fill_bf16_kernel, kFillBlocks, kThreads, 0, ctx.stream(), out, n);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
