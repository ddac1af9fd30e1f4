#pragma once
// The host side of sampling on the GPU (host code only): uploads each row's parameters and penalty
// window, launches the sampling kernels on logit rows the decoder left on the device, and brings
// back only the token ids.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/gpu/device_buffer.h"
#include "backend/gpu/sampling.h"
#include "model/forward_pass.h"

namespace rf::gpu {

class DeviceSampler {
 public:
  explicit DeviceSampler(int vocab) : vocab_(vocab) {}

  // Uploads the rows' parameters and windows (each sampler's next draw is taken here).
  void prepare(std::span<const SampleRow> rows, gpuStream_t stream);
  // Samples prepared rows [first, first + count) from `logits`, count rows of vocab on the device.
  void sample(float* logits, int first, int count, gpuStream_t stream);
  // The prepared rows' tokens, once the stream has sampled them all.
  std::vector<std::int32_t> tokens(gpuStream_t stream);

 private:
  int vocab_;
  std::vector<RowSampling> params_;
  std::vector<std::int32_t> history_;
  DeviceBuffer<RowSampling> device_params_;
  DeviceBuffer<std::int32_t> device_history_;
  DeviceBuffer<std::int32_t> counts_;  // the penalties' scratch: rows * vocab, kept zeroed
  DeviceBuffer<std::int32_t> tokens_;
};

}  // namespace rf::gpu
