// A kernel that faults on purpose, for the test that a lost device ends the process cleanly.
#include "backend/gpu/support/kernels.h"

namespace rf::gpu::test {

namespace {

__global__ void write_through_kernel(float* p) { *p = 1.0f; }

}  // namespace

void launch_illegal_write(const DeviceContext& ctx) {
  // An address no allocation has: the write faults (cudaErrorIllegalAddress, hipErrorIllegalAddress).
  launch_kernel(write_through_kernel, dim3(1), dim3(1), 0, ctx.stream(), reinterpret_cast<float*>(std::uintptr_t{0x10}));
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu::test
