#include "backend/gpu/device_sampler.h"

#include <algorithm>

namespace rf::gpu {

namespace {

// Grows `buffer` to hold at least `count` elements (its contents are not kept).
template <class T>
void reserve(DeviceBuffer<T>& buffer, std::size_t count) {
  if (buffer.size() < count) buffer = DeviceBuffer<T>(std::max(count, 2 * buffer.size()));
}

template <class T>
void upload_async(DeviceBuffer<T>& buffer, const std::vector<T>& host, gpuStream_t stream) {
  reserve(buffer, host.size());
  if (!host.empty()) {
    RF_GPU_CHECK(gpuMemcpyAsync(buffer.data(), host.data(), host.size() * sizeof(T), gpuMemcpyHostToDevice, stream));
  }
}

}  // namespace

RowSampling row_sampling(const SamplingParams& params, std::uint64_t draw, int history_begin, int history_length) {
  return {static_cast<float>(params.temperature), params.top_k, params.top_p, params.min_p,
          static_cast<float>(params.repetition_penalty), params.presence_penalty, params.frequency_penalty,
          params.seed, draw, history_begin, history_length};
}

void DeviceSampler::prepare(std::span<const SampleRow> rows, gpuStream_t stream) {
  params_.clear();
  history_.clear();
  for (const auto& row : rows) {
    const auto window = penalty_window(row.sampler.params(), row.history);
    params_.push_back(row_sampling(row.sampler.params(), row.sampler.next_draw(), static_cast<int>(history_.size()),
                                   static_cast<int>(window.size())));
    history_.insert(history_.end(), window.begin(), window.end());
  }
  upload_async(device_params_, params_, stream);
  upload_async(device_history_, history_, stream);
  reserve(tokens_, rows.size());
  if (counts_.size() < rows.size() * vocab_) {
    counts_ = DeviceBuffer<std::int32_t>(rows.size() * vocab_);
    counts_.zero();
  }
}

void DeviceSampler::sample(float* logits, int first, int count, gpuStream_t stream) {
  const std::int32_t* history = history_.empty() ? nullptr : device_history_.data();  // no penalties' launch
  launch_sample(logits, count, vocab_, device_params_.data() + first, history, counts_.data(), tokens_.data() + first,
                stream);
}

std::vector<std::int32_t> DeviceSampler::tokens(gpuStream_t stream) {
  std::vector<std::int32_t> host(params_.size());
  if (!host.empty()) {
    RF_GPU_CHECK(gpuMemcpyAsync(host.data(), tokens_.data(), host.size() * sizeof(std::int32_t), gpuMemcpyDeviceToHost,
                                stream));
  }
  RF_GPU_CHECK(gpuStreamSynchronize(stream));
  return host;
}

}  // namespace rf::gpu
