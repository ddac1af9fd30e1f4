#pragma once
// Timing for the GPU benchmarks: device events around queued work, medians over repeats.
#include <algorithm>
#include <vector>

#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu::test {

class EventTimer {
 public:
  EventTimer() {
    RF_GPU_CHECK(gpuEventCreate(&start_));
    RF_GPU_CHECK(gpuEventCreate(&stop_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() {
    (void)gpuEventDestroy(start_);
    (void)gpuEventDestroy(stop_);
  }
  void start(const DeviceContext& ctx) { RF_GPU_CHECK(gpuEventRecord(start_, ctx.stream())); }
  float stop_ms(const DeviceContext& ctx) {
    RF_GPU_CHECK(gpuEventRecord(stop_, ctx.stream()));
    RF_GPU_CHECK(gpuEventSynchronize(stop_));
    float ms = 0.0f;
    RF_GPU_CHECK(gpuEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  gpuEvent_t start_, stop_;
};

inline float median(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Median milliseconds of one launch(): after 2 warm-up calls, `batches` batches of `per_batch` calls
// back to back between two events (so launch latency hides behind the previous call).
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

}  // namespace rf::gpu::test
