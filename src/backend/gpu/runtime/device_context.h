#pragma once
// One GPU as the kernels see it (host code only): its index, its stream, the attributes launches
// size themselves by, its GEMM context (cuBLAS's handle on CUDA) and the figures kernels memoise per
// device. Every launch takes the context of the device it runs on; nothing per device lives in a
// static, so that two devices (one host thread each) share no state.
//
// The runtime's current device is per host thread. A context makes its device current when made, and
// whoever drives it from another thread calls make_current() first (ContextScope): device memory
// (DeviceBuffer) is allocated on the current device, and launches check nothing of it per launch.
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {
class GemmContext;
}  // namespace rf::gpu

// GemmContext is defined by the GEMM glue alone (gemm_cublas.cpp or gemm_tiled_only.cpp), so it is
// deleted there too: callers hold it without ever seeing its definition.
template <>
struct std::default_delete<rf::gpu::GemmContext> {
  void operator()(rf::gpu::GemmContext* ctx) const;
};

namespace rf::gpu {

// What launches ask of a device, read once when its context is made.
struct DeviceAttributes {
  int index = 0;
  int multiprocessors = 0;           // SMs (NVIDIA) or compute units (AMD)
  int warp_size = 0;                 // 32 (NVIDIA), 64 (AMD CDNA) or 32 (RDNA)
  std::size_t shared_per_block = 0;  // shared memory a block may ask for, opting in past the default
  int compute_major = 0;             // CUDA's compute capability (HIP: the gfx major)
  bool dependent_launch = false;     // programmatic dependent launch (common/dependent_launch.cuh)
};

class DeviceContext {
 public:
  // Makes `device` current for the calling thread and creates the context's stream on it.
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int index() const { return attributes_.index; }
  const DeviceAttributes& attributes() const { return attributes_; }
  gpuStream_t stream() const { return stream_.get(); }
  void synchronize() const { stream_.synchronize(); }
  // Makes this context's device current for the calling thread.
  void make_current() const;

  // The GEMM's context on this stream (gemm/gemm.h: cuBLAS's handle and scratch on CUDA, nothing to hold
  // on HIP), made on first use.
  GemmContext& gemm() const;

  // A figure of this device that a launch computes once (an occupancy, say) under `key`: the
  // kernel, or the kernel with the arguments it depends on.
  using MemoKey = std::tuple<const void*, int, int, int>;
  int memo(const MemoKey& key, const std::function<int()>& compute) const;

 private:
  DeviceAttributes attributes_;
  Stream stream_;
  mutable std::unique_ptr<GemmContext> gemm_;
  mutable std::mutex memo_mutex_;
  mutable std::map<MemoKey, int> memo_;
};

// Makes a context's device current for this thread for the scope's life, and the one before again after.
class ContextScope {
 public:
  explicit ContextScope(const DeviceContext& context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace rf::gpu
