#pragma once
// Programmatic dependent launch (CUDA, compute capability 9.0+): a kernel started by launch_dependent
// may be scheduled while the kernel before it on the context's stream is still finishing, so that its launch,
// and whatever it does before begin_dependent() (reading weights, which no kernel writes), overlap
// that kernel's tail. Decode runs hundreds of short kernels per token, each of which otherwise waits
// for the last block of the one before to retire before its own first block starts.
//
// The contract: a kernel launched this way calls begin_dependent() before it touches memory that the
// kernel before it writes or reads. begin_dependent() waits until the previous kernel has completed
// (which itself waited for the one before it) and then lets the next kernel launch. So a kernel that
// runs has seen the kernel two launches back complete, and may read before begin_dependent() what was
// written before that (the decode attention's cached keys). On HIP and older NVIDIA GPUs launches are
// ordinary and begin_dependent() does nothing.
#include <cstddef>
#include <utility>

#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

__device__ __forceinline__ void begin_dependent() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// kernel<<<grid, block, shared_bytes, ctx.stream()>>>(args...), allowed to overlap the previous kernel
// where the context's device has dependent launch.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, const DeviceContext& ctx,
                      Args&&... args) {
#if defined(ROCMFORGE_GPU_CUDA)
  if (ctx.attributes().dependent_launch) {
    cudaLaunchAttribute overlap{};
    overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = ctx.stream();
    config.attrs = &overlap;
    config.numAttrs = 1;
    RF_GPU_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
    return;
  }
#endif
  launch_kernel(kernel, grid, block, shared_bytes, ctx.stream(), std::forward<Args>(args)...);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
