#include "backend/gpu/sampling/device_sampler.h"

#include <algorithm>

namespace rf::gpu {

namespace {

// Grows `buffer` to hold at least `count` elements (its contents are not kept).
template <class T>
void reserve(DeviceBuffer<T>& buffer, std::size_t count) {
  if (buffer.size() < count) buffer = DeviceBuffer<T>(std::max(count, 2 * buffer.size()));
}

template <class T>
void upload_async(Uploads<T>& uploads, DeviceBuffer<T>& buffer, const std::vector<T>& host, const DeviceContext& ctx) {
  reserve(buffer, host.size());
  uploads.upload(host.data(), host.size(), buffer.data(), ctx.stream());
}

}  // namespace

RowSampling row_sampling(const SamplingParams& params, std::uint64_t draw, int history_begin, int history_length,
                         int mask_begin) {
  return {static_cast<float>(params.temperature), params.top_k, params.top_p, params.min_p,
          static_cast<float>(params.repetition_penalty), params.presence_penalty, params.frequency_penalty,
          params.seed, draw, history_begin, history_length, mask_begin};
}

DeviceSampler::DeviceSampler(int vocab, int max_rows)
    : vocab_(vocab),
      max_rows_(max_rows),
      scratch_(sample_scratch_keys(max_rows, vocab)),
      tokens_(static_cast<std::size_t>(max_rows)) {}

void DeviceSampler::prepare(std::span<const SampleRow> rows, const DeviceContext& ctx) {
  if (in_flight_ == static_cast<int>(steps_.size())) fail("at most {} sampling steps may be in flight", steps_.size());
  params_.clear();
  history_.clear();
  masks_.clear();
  for (const auto& row : rows) {
    if (!row.sampler.params().logit_bias.empty()) fail("a logit bias is applied by the host sampler, not the device's");
    const auto window = penalty_window(row.sampler.params(), row.history);
    int mask_begin = -1;
    if (!row.allowed.empty()) {  // ids past the mask are left out, as mask_logits leaves them
      mask_begin = static_cast<int>(masks_.size());
      const std::size_t words = mask_words(vocab_);
      masks_.insert(masks_.end(), row.allowed.begin(), row.allowed.begin() + std::min(words, row.allowed.size()));
      masks_.resize(mask_begin + words, 0);
    }
    params_.push_back(row_sampling(row.sampler.params(), row.sampler.next_draw(), static_cast<int>(history_.size()),
                                   static_cast<int>(window.size()), mask_begin));
    history_.insert(history_.end(), window.begin(), window.end());
  }
  upload_async(param_uploads_, device_params_, params_, ctx);
  upload_async(history_uploads_, device_history_, history_, ctx);
  if (!masks_.empty()) upload_async(mask_uploads_, device_masks_, masks_, ctx);
  const std::size_t counted = std::min<std::size_t>(rows.size(), max_rows_) * vocab_;
  if (!history_.empty() && counts_.size() < counted) {
    counts_ = DeviceBuffer<std::int32_t>(counted);
    counts_.zero();
  }
  Step& step = filling();
  if (step.tokens.size() < rows.size()) step.tokens = PinnedBuffer<std::int32_t>(std::max(rows.size(), 2 * step.tokens.size()));
  step.rows = rows.size();
  whole_step_in_one_call_ = false;
}

void DeviceSampler::sample(float* logits, int first, int count, const DeviceContext& ctx) {
  if (count > max_rows_) fail("{} rows to sample at once, where the sampler takes {}", count, max_rows_);
  const std::int32_t* history = history_.empty() ? nullptr : device_history_.data();  // no penalties' launch
  const std::uint64_t* masks = masks_.empty() ? nullptr : device_masks_.data();     // no masks' launch
  launch_sample(logits, count, vocab_, device_params_.data() + first, history, masks, counts_.data(), scratch_.data(),
                tokens_.data(), ctx);
  Step& step = filling();
  RF_GPU_CHECK(gpuMemcpyAsync(step.tokens.data() + first, tokens_.data(), count * sizeof(std::int32_t),
                              gpuMemcpyDeviceToHost, ctx.stream()));
  whole_step_in_one_call_ = first == 0 && static_cast<std::size_t>(count) == step.rows;
}

void DeviceSampler::finish(const DeviceContext& ctx) {
  Step& step = filling();
  step.copied.record(ctx.stream());
  ++in_flight_;
  rows_on_device_ = whole_step_in_one_call_ ? static_cast<int>(step.rows) : 0;
}

std::vector<std::int32_t> DeviceSampler::take() {
  if (in_flight_ == 0) fail("no sampling step is in flight");
  Step& step = steps_[oldest_];
  step.copied.synchronize();
  std::vector<std::int32_t> tokens(step.tokens.data(), step.tokens.data() + step.rows);
  oldest_ = (oldest_ + 1) % static_cast<int>(steps_.size());
  --in_flight_;
  return tokens;
}

}  // namespace rf::gpu
