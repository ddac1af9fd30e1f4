#pragma once
// What a backend offers the engine: one forward step over a Batch against the KV cache it owns.
// The CPU decoder and the GPU decoder both implement it; the engine never sees which.
#include <string>
#include <vector>

#include "model/batch.h"

namespace rf {

class ForwardPass {
 public:
  virtual ~ForwardPass() = default;

  // logits: batch.logit_rows.size() rows of vocab_size values, on the host.
  virtual void forward(const Batch& batch, std::vector<float>& logits) = 0;
  // Blocks of block_size positions in the KV cache (the allocator hands out 0 .. n_blocks-1).
  virtual int kv_blocks() const = 0;
  virtual std::size_t kv_cache_bytes() const = 0;
  virtual std::string device_name() const = 0;
};

}  // namespace rf
