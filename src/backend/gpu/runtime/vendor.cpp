#include "backend/gpu/runtime/vendor.h"

#include "util/error.h"

namespace rf::gpu {

const char* backend_name() {
#if defined(ROCMFORGE_GPU_CUDA)
  return "cuda";
#else
  return "hip";
#endif
}

void throw_gpu_error(gpuError_t status, const char* call, const char* file, int line) {
  fail("{}:{}: {} failed: {}", file, line, call, gpuGetErrorString(status));
}

}  // namespace rf::gpu
