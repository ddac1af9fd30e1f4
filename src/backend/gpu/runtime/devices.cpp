#include "backend/gpu/runtime/devices.h"

#include <fmt/format.h>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/vendor.h"
#include "util/error.h"

namespace rf::gpu {

namespace {

// The runtime's words for "none", except where they mislead: CUDA reports a missing driver as an
// "insufficient" one.
std::string why_no_device(gpuError_t status) {
  if (status == gpuSuccess) return "the runtime lists none";
#if defined(ROCMFORGE_GPU_CUDA)
  int driver_version = 0;
  if (status == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver_version) == cudaSuccess &&
      driver_version == 0) {
    return "no NVIDIA driver is installed";
  }
#endif
  return gpuGetErrorString(status);
}

std::string arch_name(const gpuDeviceProp& prop) {
#if defined(ROCMFORGE_GPU_CUDA)
  return fmt::format("sm_{}{}", prop.major, prop.minor);
#elif defined(__HIP_CPU_RT__)
  (void)prop;
  return "hip-cpu";  // the CPU runs the HIP kernels: no gfx target
#else
  return prop.gcnArchName;
#endif
}

}  // namespace

DeviceScan scan_devices() {
  DeviceScan scan;
  int count = 0;
  // With no driver or no device the runtime answers with an error status; that is the reason.
  if (const gpuError_t status = gpuGetDeviceCount(&count); status != gpuSuccess || count == 0) {
    scan.why_none = fmt::format("no {} device found ({})", backend_name(), why_no_device(status));
    (void)gpuGetLastError();  // clear the sticky status so that later calls don't report it
    return scan;
  }
  for (int i = 0; i < count; ++i) {
    gpuDeviceProp prop{};
    RF_GPU_CHECK(gpuGetDeviceProperties(&prop, i));
    // The attribute, not prop.warpSize: HIP-CPU's properties give the CPU's SIMD width there, its
    // attribute (hip_cpu_compat.h) the 64-lane wavefront the kernels run.
    int warp_size = 0;
    RF_GPU_CHECK(gpuDeviceGetAttribute(&warp_size, gpuDevAttrWarpSize, i));
    scan.devices.push_back({i, prop.name, arch_name(prop), prop.totalGlobalMem, warp_size, prop.multiProcessorCount});
  }
  return scan;
}

void throw_allocation_error(gpuError_t status, std::size_t bytes) {
  if (status != gpuErrorOutOfMemory) throw_gpu_error(status, "gpuMalloc", __FILE__, __LINE__);
  (void)gpuGetLastError();  // out of memory is an answer, not an error for the next check to find
  int device = 0;
  RF_GPU_CHECK(gpuGetDevice(&device));
  const MemoryUse use = memory_use(device);
  fail("{} device {} is out of memory: {} asked, {} of its {} free", backend_name(), device, gib(bytes),
       gib(use.free), gib(use.total));
}

MemoryUse memory_use(int index) {
  int current = 0;
  RF_GPU_CHECK(gpuGetDevice(&current));
  RF_GPU_CHECK(gpuSetDevice(index));
  MemoryUse use;
  const gpuError_t status = gpuMemGetInfo(&use.free, &use.total);
  RF_GPU_CHECK(gpuSetDevice(current));
  RF_GPU_CHECK(status);
  return use;
}

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

}  // namespace rf::gpu
