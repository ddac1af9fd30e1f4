#include "backend/gpu/runtime/vendor.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "util/error.h"

namespace rf::gpu {

const char* backend_name() {
#if defined(ROCMFORGE_GPU_CUDA)
  return "cuda";
#else
  return "hip";
#endif
}

namespace {

// Errors after which every call on the context fails the same way (CUDA's "sticky" errors).
bool context_lost(gpuError_t status) {
  switch (status) {
#if defined(ROCMFORGE_GPU_CUDA)
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
#else
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorECCNotCorrectable:
    case hipErrorAssert:
#endif
      return true;
    default:
      return false;
  }
}

}  // namespace

void throw_gpu_error(gpuError_t status, const char* call, const char* file, int line) {
  if (context_lost(status)) {
    fmt::print(stderr, "rocmforge: the GPU failed ({} in {} at {}:{}); its state is lost, so rocmforge exits\n",
               gpuGetErrorString(status), call, file, line);
    std::fflush(stderr);
    // No destructors or atexit handlers: they would call into the lost context, and may hang there.
    std::_Exit(kExitDeviceLost);
  }
  fail("{}:{}: {} failed: {}", file, line, call, gpuGetErrorString(status));
}

}  // namespace rf::gpu
