#include "backend/gpu/runtime/devices.h"

#include <mutex>
#include <unordered_map>
#include <utility>

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

namespace {

// What rocmforge's buffers hold on each device, under the bound. Never destroyed: buffers held by
// statics may be released while the process exits.
struct Ledger {
  std::mutex mutex;
  MemoryBound bound;
  std::unordered_map<void*, std::pair<int, std::size_t>> blocks;  // device and bytes of each buffer
  std::unordered_map<int, std::size_t> held;
};
Ledger& ledger() {
  static Ledger* const instance = new Ledger;
  return *instance;
}

std::size_t bound_bytes(const MemoryBound& bound, std::size_t total) {
  if (bound.bytes > 0) return static_cast<std::size_t>(bound.bytes);
  return bound.share >= 1.0 ? total : static_cast<std::size_t>(bound.share * static_cast<double>(total));
}

// Allocates on the current device; for lack of room, nullptr (or_null) or an rf::Error saying why.
void* allocate_counted(std::size_t bytes, bool or_null) {
  int device = 0;
  RF_GPU_CHECK(gpuGetDevice(&device));
  Ledger& l = ledger();
  std::unique_lock lock(l.mutex);
  std::size_t& held = l.held[device];
  if (l.bound.bounds_anything()) {
    std::size_t free = 0, total = 0;
    RF_GPU_CHECK(gpuMemGetInfo(&free, &total));
    const std::size_t bound = bound_bytes(l.bound, total);
    if (held + bytes > bound) {
      if (or_null) return nullptr;
      fail("{} device {}: {} asked, and rocmforge's buffers already hold {} of the {} that --gpu-memory allows",
           backend_name(), device, gib(bytes), gib(held), gib(bound));
    }
  }
  void* p = nullptr;
  if (const gpuError_t status = gpuMalloc(&p, bytes); status != gpuSuccess) {
    if (status != gpuErrorOutOfMemory) throw_gpu_error(status, "gpuMalloc", __FILE__, __LINE__);
    (void)gpuGetLastError();  // out of memory is an answer, not an error for the next check to find
    if (or_null) return nullptr;
    lock.unlock();
    const MemoryUse use = memory_use(device);
    fail("{} device {} is out of memory: {} asked, {} of its {} free", backend_name(), device, gib(bytes),
         gib(use.free), gib(use.total));
  }
  l.blocks.emplace(p, std::pair{device, bytes});
  held += bytes;
  return p;
}

}  // namespace

void* DeviceMemory::allocate(std::size_t bytes) { return allocate_counted(bytes, false); }

void* DeviceMemory::try_allocate(std::size_t bytes) { return allocate_counted(bytes, true); }

void DeviceMemory::release(void* p) {
  {
    Ledger& l = ledger();
    const std::lock_guard lock(l.mutex);
    if (const auto it = l.blocks.find(p); it != l.blocks.end()) {
      l.held[it->second.first] -= it->second.second;
      l.blocks.erase(it);
    }
  }
  (void)gpuFree(p);  // nothing useful to do with an error while unwinding
}

void set_memory_bound(const MemoryBound& bound) {
  Ledger& l = ledger();
  const std::lock_guard lock(l.mutex);
  l.bound = bound;
}

MemoryUse memory_use(int index) {
  int current = 0;
  RF_GPU_CHECK(gpuGetDevice(&current));
  RF_GPU_CHECK(gpuSetDevice(index));
  MemoryUse use;
  const gpuError_t status = gpuMemGetInfo(&use.free, &use.total);
  RF_GPU_CHECK(gpuSetDevice(current));
  RF_GPU_CHECK(status);
  Ledger& l = ledger();
  const std::lock_guard lock(l.mutex);
  use.held = l.held[index];
  use.bound = bound_bytes(l.bound, use.total);
  return use;
}

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

}  // namespace rf::gpu
