#pragma once
// The host side of sampling on the GPU (host code only): uploads each row's parameters, penalty
// window and grammar mask, launches the sampling kernels on logit rows the decoder left on the device, and brings
// back only the token ids, without waiting for them: up to two steps' tokens may be on their way.
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/host_staging.h"
#include "backend/gpu/sampling/sampling.h"
#include "model/forward_pass.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

class DeviceSampler {
 public:
  // max_rows: the most rows one sample() call takes.
  DeviceSampler(int vocab, int max_rows);

  // Begins a step: uploads its rows' parameters and windows (each sampler's next draw is taken here).
  void prepare(std::span<const SampleRow> rows, const DeviceContext& ctx);
  // Samples the step's rows [first, first + count) from `logits`, count rows of vocab on the device.
  void sample(float* logits, int first, int count, const DeviceContext& ctx);
  // Ends the step: once the context's stream gets here, its tokens are on the host for take().
  void finish(const DeviceContext& ctx);
  // The oldest finished step's tokens, waiting for the stream to bring them.
  std::vector<std::int32_t> take();
  int steps_in_flight() const { return in_flight_; }

  // Where the last finished step left its tokens on the device, if it sampled all its rows in one
  // call (the next step reads them there: ForwardPass::queue_sample); fixed for the sampler's life.
  const std::int32_t* device_tokens() const { return tokens_.data(); }
  // Rows of the last finished step that device_tokens() holds: all of them, or 0.
  int rows_on_device() const { return rows_on_device_; }

 private:
  struct Step {
    PinnedBuffer<std::int32_t> tokens;
    Event copied;
    std::size_t rows = 0;
  };
  // The step between prepare() and finish(): the one after those in flight.
  Step& filling() { return steps_[(oldest_ + in_flight_) % steps_.size()]; }

  int vocab_;
  int max_rows_;
  std::vector<RowSampling> params_;
  std::vector<std::int32_t> history_;
  std::vector<std::uint64_t> masks_;  // grammars' masks of the rows that have one, mask_words(vocab_) each
  Uploads<RowSampling> param_uploads_;
  Uploads<std::int32_t> history_uploads_;
  Uploads<std::uint64_t> mask_uploads_;
  DeviceBuffer<RowSampling> device_params_;
  DeviceBuffer<std::int32_t> device_history_;
  DeviceBuffer<std::uint64_t> device_masks_;
  DeviceBuffer<std::int32_t> counts_;  // the penalties' scratch: a call's rows * vocab, kept zeroed
  DeviceBuffer<std::uint64_t> scratch_;  // launch_sample's, for max_rows rows
  DeviceBuffer<std::int32_t> tokens_;    // one sample() call's picks
  std::array<Step, 2> steps_;          // in flight: in_flight_ of them from oldest_, in turn
  int oldest_ = 0;
  int in_flight_ = 0;
  bool whole_step_in_one_call_ = false;
  int rows_on_device_ = 0;
};

}  // namespace rf::gpu
