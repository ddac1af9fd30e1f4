#pragma once
// A recorded sequence of launches on one stream, replayed by one call (host code only): a decode
// step's few hundred launches cost one launch's overhead. What the launches read must stay at the
// same device addresses between replays; per-step inputs are copied into fixed buffers first.
#include <functional>
#include <utility>

#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

// Whether this build's runtime captures graphs: HIP-CPU (the hip-cpu preset) has no graph API, so
// callers launch eagerly there and a CapturedGraph made anyway throws.
#if defined(__HIP_CPU_RT__)
inline constexpr bool kGraphCapture = false;
#else
inline constexpr bool kGraphCapture = true;
#endif

class CapturedGraph {
 public:
  // Records what `launches` enqueues on `stream` (nothing runs while it does) and instantiates it.
  CapturedGraph(gpuStream_t stream, const std::function<void()>& launches);
  CapturedGraph(CapturedGraph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  CapturedGraph& operator=(CapturedGraph&&) = delete;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph();

  void launch(gpuStream_t stream) const;

 private:
#if defined(__HIP_CPU_RT__)
  void* exec_ = nullptr;
#else
  gpuGraphExec_t exec_ = nullptr;
#endif
};

}  // namespace rf::gpu
