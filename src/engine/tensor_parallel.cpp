#include "engine/tensor_parallel.h"

#include <fmt/format.h>

#include "util/error.h"

namespace rf {

namespace {

// A row's sampler as every rank sees it: its parameters, and the one draw taken for this step.
class SameDraw final : public TokenSampler {
 public:
  SameDraw(const TokenSampler& row, std::uint64_t draw) : row_(row), draw_(draw) {}
  const SamplingParams& params() const override { return row_.params(); }
  std::int32_t sample(std::span<float>, std::span<const std::int32_t>) override {
    fail("tensor parallelism: a rank sampled host logits where its device samples");
  }
  std::uint64_t next_draw() override { return draw_; }

 private:
  const TokenSampler& row_;
  std::uint64_t draw_;
};

}  // namespace

TensorParallelForward::TensorParallelForward(const ModelConfig& config, const LlamaWeights& weights, int world,
                                             Backend backend)
    : backend_(std::move(backend)),
      shards_(world),
      passes_(world),
      rank_outputs_(world),
      threads_(world, backend_.abort) {
  llama::check_split(config, weights, world);
  for (int r = 0; r < world; ++r) configs_.push_back(llama::rank_config(config, r, world));
  run([&](int r) {
    shards_[r] = std::make_unique<llama::WeightShard>(config, weights, r, world);
    passes_[r] = backend_.make(r, configs_[r], shards_[r]->weights());
    if (backend_.copies_weights) shards_[r].reset();
  });
  for (int r = 1; r < world; ++r) {
    if (passes_[r]->kv_blocks() != passes_[0]->kv_blocks()) {
      fail("tensor parallelism: rank {}'s KV cache holds {} blocks, rank 0's {}", r, passes_[r]->kv_blocks(),
           passes_[0]->kv_blocks());
    }
  }
}

TensorParallelForward::~TensorParallelForward() {
  // Each pass goes on its own thread, where its device is current.
  threads_.run([&](int r) { passes_[r].reset(); });
}

void TensorParallelForward::run(const std::function<void(int rank)>& fn) {
  if (broken_) fail("tensor parallelism: a rank failed before; the model must be loaded again");
  try {
    threads_.run(fn);
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void TensorParallelForward::forward(const Batch& batch, std::vector<float>& logits) {
  run([&](int r) { passes_[r]->forward(batch, r == 0 ? logits : rank_outputs_[r]); });
}

void TensorParallelForward::hidden_states(const Batch& batch, std::vector<float>& states) {
  run([&](int r) { passes_[r]->hidden_states(batch, r == 0 ? states : rank_outputs_[r]); });
}

std::vector<std::int32_t> TensorParallelForward::sample(const Batch& batch, std::span<const SampleRow> rows) {
  if (!backend_.samples_on_device) return ForwardPass::sample(batch, rows);
  queue_sample(batch, rows);
  return take_tokens();
}

void TensorParallelForward::queue_sample(const Batch& batch, std::span<const SampleRow> rows) {
  if (!backend_.samples_on_device) return ForwardPass::queue_sample(batch, rows);
  std::vector<SameDraw> draws;
  draws.reserve(rows.size());
  for (const SampleRow& row : rows) draws.emplace_back(row.sampler, row.sampler.next_draw());
  std::vector<SampleRow> same;
  for (std::size_t i = 0; i < rows.size(); ++i) same.push_back({draws[i], rows[i].history, rows[i].allowed});
  run([&](int r) { passes_[r]->queue_sample(batch, same); });
}

std::vector<std::int32_t> TensorParallelForward::take_tokens() {
  if (!backend_.samples_on_device) return ForwardPass::take_tokens();
  std::vector<std::vector<std::int32_t>> tokens(ranks());
  run([&](int r) { tokens[r] = passes_[r]->take_tokens(); });
  for (int r = 1; r < ranks(); ++r) {
    if (tokens[r] != tokens[0]) {
      broken_ = true;
      fail("tensor parallelism: rank {} sampled other tokens than rank 0 (their hidden states parted)", r);
    }
  }
  return tokens[0];
}

int TensorParallelForward::kv_blocks() const { return passes_[0]->kv_blocks(); }

std::size_t TensorParallelForward::kv_cache_bytes() const {
  std::size_t bytes = 0;
  for (const auto& pass : passes_) bytes += pass->kv_cache_bytes();
  return bytes;
}

std::string TensorParallelForward::device_name() const {
  std::string names;
  for (const auto& pass : passes_) names += (names.empty() ? "" : " + ") + pass->device_name();
  return fmt::format("{} (tensor parallel over {})", names, ranks());
}

DeviceCeilings TensorParallelForward::measure_ceilings() {
  DeviceCeilings ceilings;
  run([&](int r) {
    if (r == 0) ceilings = passes_[0]->measure_ceilings();
  });
  ceilings.device = device_name();
  return ceilings;
}

}  // namespace rf
