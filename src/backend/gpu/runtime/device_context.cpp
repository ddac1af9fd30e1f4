#include "backend/gpu/runtime/device_context.h"

#include <cstdlib>
#include <string_view>

#include "backend/gpu/gemm/gemm.h"
#include "util/error.h"

namespace rf::gpu {

namespace {

int attribute(gpuDeviceAttribute which, int device) {
  int value = 0;
  RF_GPU_CHECK(gpuDeviceGetAttribute(&value, which, device));
  return value;
}

// Programmatic dependent launch: CUDA on compute capability 9.0 or later, unless
// ROCMFORGE_DEPENDENT_LAUNCH=0 (there to measure what it gains).
bool dependent_launch_allowed(int compute_major) {
#if defined(ROCMFORGE_GPU_CUDA)
  const char* setting = std::getenv("ROCMFORGE_DEPENDENT_LAUNCH");
  return compute_major >= 9 && (setting == nullptr || std::string_view(setting) != "0");
#else
  (void)compute_major;
  return false;
#endif
}

// Sets the device before the stream member is made, which creates the stream on it.
DeviceAttributes read_attributes(int device) {
  int count = 0;
  RF_GPU_CHECK(gpuGetDeviceCount(&count));
  if (device < 0 || device >= count) fail("no {} device {}: this machine has {}", backend_name(), device, count);
  RF_GPU_CHECK(gpuSetDevice(device));
  DeviceAttributes a;
  a.index = device;
  a.multiprocessors = attribute(gpuDevAttrMultiProcessorCount, device);
  a.warp_size = attribute(gpuDevAttrWarpSize, device);
  a.shared_per_block = static_cast<std::size_t>(attribute(gpuDevAttrSharedPerBlockOptin, device));
  a.compute_major = attribute(gpuDevAttrComputeCapabilityMajor, device);
  a.dependent_launch = dependent_launch_allowed(a.compute_major);
  return a;
}

}  // namespace

DeviceContext::DeviceContext(int device) : attributes_(read_attributes(device)) {}

DeviceContext::~DeviceContext() {
  (void)gpuSetDevice(attributes_.index);  // the GEMM context and the stream go with their device current
}

void DeviceContext::make_current() const { RF_GPU_CHECK(gpuSetDevice(attributes_.index)); }

GemmContext& DeviceContext::gemm() const {
  if (!gemm_) gemm_ = make_gemm_context(*this);
  return *gemm_;
}

int DeviceContext::memo(const MemoKey& key, const std::function<int()>& compute) const {
  const std::lock_guard lock(memo_mutex_);
  if (const auto found = memo_.find(key); found != memo_.end()) return found->second;
  return memo_[key] = compute();
}

ContextScope::ContextScope(const DeviceContext& context) {
  RF_GPU_CHECK(gpuGetDevice(&previous_));
  context.make_current();
}

ContextScope::~ContextScope() { (void)gpuSetDevice(previous_); }

}  // namespace rf::gpu
