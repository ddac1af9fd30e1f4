#include "backend/gpu/vendor.h"

#include <cstdlib>
#include <string_view>

#include "util/error.h"

namespace rf::gpu {

const char* backend_name() {
#if defined(ROCMFORGE_GPU_CUDA)
  return "cuda";
#else
  return "hip";
#endif
}

bool dependent_launch_enabled() {
#if defined(ROCMFORGE_GPU_CUDA)
  static const bool allowed = [] {
    const char* setting = std::getenv("ROCMFORGE_DEPENDENT_LAUNCH");
    return setting == nullptr || std::string_view(setting) != "0";
  }();
  if (!allowed) return false;
  int device = 0, major = 0;
  RF_GPU_CHECK(cudaGetDevice(&device));
  RF_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major >= 9;
#else
  return false;
#endif
}

void throw_gpu_error(gpuError_t status, const char* call, const char* file, int line) {
  fail("{}:{}: {} failed: {}", file, line, call, gpuGetErrorString(status));
}

}  // namespace rf::gpu
