#pragma once
// An attention problem for the GPU tests and benchmarks: sequences' chunks in one batch over a paged
// f16 KV cache, q and the cache drawn at random, on the host and on the device, with the reference
// that mirrors rf::llama::CpuForward::attention over the same f16 cache values.
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/rope/rope.h"
#include "backend/gpu/attention/attention.h"

namespace rf::gpu::test {

// A sequence's tokens in the batch: positions context..context + tokens - 1, whose keys and values (like
// those of the context before them) are already in the cache, as launch_rope_kv_append leaves them.
struct SequenceChunk {
  int context;
  int tokens;
};

class AttentionProblem {
 public:
  using RandomFloats = std::function<std::vector<float>(std::size_t n, float lo, float hi)>;
  using RandomInt = std::function<int(int lo, int hi)>;  // in [lo, hi]

  // Blocks of `block_size` positions are handed out in random order; cache slots no position uses hold
  // NaN, so that reading one shows.
  AttentionProblem(HeadShape shape, int block_size, const std::vector<SequenceChunk>& chunks,
                   const RandomFloats& random_floats, const RandomInt& random_int);

  float scale() const;
  // The batch, with this problem's window and soft cap.
  AttentionBatch batch() const;
  KvCacheLayer cache() const { return cache_; }
  std::vector<double> reference() const;  // [n_tokens][q_dim]

  HeadShape shape;
  int block_size;
  int window = 0;        // AttentionBatch::window: the last `window` positions; 0: all
  float softcap = 0.0f;  // AttentionBatch::softcap; 0: none
  std::vector<float> q;                         // [n_tokens][q_dim]
  std::vector<std::uint16_t> keys, values;      // [slot][kv_dim], f16 bits
  std::vector<std::int32_t> positions, seq, block_tables;
  DeviceBuffer<float> q_gpu;

 private:
  DeviceBuffer<std::uint16_t> keys_gpu_, values_gpu_;
  DeviceBuffer<std::int32_t> positions_gpu_, seq_gpu_, block_tables_gpu_;
  AttentionBatch batch_{};
  KvCacheLayer cache_{};
};

}  // namespace rf::gpu::test
