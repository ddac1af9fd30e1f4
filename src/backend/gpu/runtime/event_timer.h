#pragma once
// Timing queued work by device events: for the probes, the benchmarks, and choices made by measuring
// (which convolution path is faster for a shape).
#include <algorithm>
#include <vector>

#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

class EventTimer {
 public:
  EventTimer() {
    RF_GPU_CHECK(gpuEventCreate(&start_));
    if (const gpuError_t status = gpuEventCreate(&stop_); status != gpuSuccess) {
      (void)gpuEventDestroy(start_);
      RF_GPU_CHECK(status);
    }
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    (void)gpuEventDestroy(start_);
    (void)gpuEventDestroy(stop_);
  }
  void start(const DeviceContext& ctx) { RF_GPU_CHECK(gpuEventRecord(start_, ctx.stream())); }
  // Milliseconds since start(), waiting for the work queued between.
  float stop_ms(const DeviceContext& ctx) {
    RF_GPU_CHECK(gpuEventRecord(stop_, ctx.stream()));
    RF_GPU_CHECK(gpuEventSynchronize(stop_));
    float ms = 0.0f;
    RF_GPU_CHECK(gpuEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  gpuEvent_t start_{}, stop_{};
};

inline float median(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Median milliseconds of one launch(): after 2 warm-up calls, `batches` batches of `per_batch` calls
// back to back between two events, so that the host's launching hides behind the previous call, as
// it does in a stream of queued work.
template <class Launch>
float median_ms(const DeviceContext& ctx, int batches, int per_batch, Launch launch) {
  EventTimer timer;
  for (int i = 0; i < 2; ++i) launch();
  std::vector<float> ms;
  for (int b = 0; b < batches; ++b) {
    timer.start(ctx);
    for (int i = 0; i < per_batch; ++i) launch();
    ms.push_back(timer.stop_ms(ctx) / per_batch);
  }
  return median(ms);
}

}  // namespace rf::gpu
