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

int current_device_attribute(gpuDeviceAttribute attribute) {
  int device = 0, value = 0;
  RF_GPU_CHECK(gpuGetDevice(&device));
  RF_GPU_CHECK(gpuDeviceGetAttribute(&value, attribute, device));
  return value;
}

bool dependent_launch_enabled() {
#if defined(ROCMFORGE_GPU_CUDA)
  static const bool allowed = [] {
    const char* setting = std::getenv("ROCMFORGE_DEPENDENT_LAUNCH");
    return setting == nullptr || std::string_view(setting) != "0";
  }();
  if (!allowed) return false;
  return current_device_attribute(cudaDevAttrComputeCapabilityMajor) >= 9;
#else
  return false;
#endif
}

void throw_gpu_error(gpuError_t status, const char* call, const char* file, int line) {
  fail("{}:{}: {} failed: {}", file, line, call, gpuGetErrorString(status));
}

}  // namespace rf::gpu
