#pragma once
// What a backend offers the engine: one forward step over a Batch against the KV cache it owns,
// and the same step followed by sampling. The CPU decoder and the GPU decoder both implement it;
// the engine never sees which.
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/sampling.h"

namespace rf {

// How to pick the next token of one logit row.
struct SampleRow {
  TokenSampler& sampler;                  // the row's sequence's
  std::span<const std::int32_t> history;  // that sequence so far, prompt included (for the penalties)
  std::span<const std::uint64_t> allowed = {};  // a grammar's mask (see mask_logits); empty: every token
};

// What the device can do at best, measured: the denominators of the benchmark's bounds.
struct DeviceCeilings {
  std::string device;
  double read_bandwidth = 0;  // bytes/s
  double matmul_flops = 0;    // flop/s
};

// Device memory a backend's model takes, by purpose.
struct MemoryFootprint {
  std::size_t weights = 0;
  std::size_t kv_cache = 0;
  std::size_t activations = 0;  // a step's activations, logits and inputs
  std::size_t total() const { return weights + kv_cache + activations; }
};

class ForwardPass {
 public:
  virtual ~ForwardPass() = default;

  // logits: batch.logit_rows.size() rows of vocab_size values, on the host.
  virtual void forward(const Batch& batch, std::vector<float>& logits) = 0;
  // The same step, but for each logit row its final hidden state (after the model's last norm,
  // before the output projection): rows of hidden_size values, on the host. What embeddings pool.
  virtual void hidden_states(const Batch& batch, std::vector<float>& states) = 0;
  // forward(batch), then the next token of each logit row (rows[r] samples logit row r). This
  // default samples host logits with each row's sampler; a GPU backend samples on the device, so
  // that only the token ids cross to the host.
  virtual std::vector<std::int32_t> sample(const Batch& batch, std::span<const SampleRow> rows);
  // Decoding ahead: queue_sample starts sample(batch, rows) and returns without waiting for its
  // tokens, which take_tokens() then waits for, oldest step first. A token of the batch may be
  // previous_token(r) (model/batch.h): what the step queued just before samples for its row r, which
  // then never waits on the host. So the host prepares step t + 1 while the device runs step t. At
  // most kStepsInFlight steps are queued and not yet taken; sample() wants none. With a
  // previous_token, no row may have penalties: their window would miss the token the host lacks.
  static constexpr int kStepsInFlight = 2;
  virtual void queue_sample(const Batch& batch, std::span<const SampleRow> rows);
  virtual std::vector<std::int32_t> take_tokens();
  // Blocks of block_size positions in the KV cache (the allocator hands out 0 .. n_blocks-1).
  virtual int kv_blocks() const = 0;
  virtual std::size_t kv_cache_bytes() const = 0;
  virtual std::string device_name() const = 0;
  // Runs the device's read-bandwidth and matmul probes (seconds of work).
  virtual DeviceCeilings measure_ceilings() = 0;
  // Devices the model is split over (tensor parallelism), each with its share of the work.
  virtual int ranks() const { return 1; }

 protected:
  // Throws rf::Error unless rows has one entry per logit row of the batch.
  static void check_rows(const Batch& batch, std::span<const SampleRow> rows);
  // Throws rf::Error where queue_sample may not take the batch (see there) with `steps_in_flight`
  // queued and not taken; check_batch checks what its previous_token()s refer to.
  static void check_queued(const Batch& batch, std::span<const SampleRow> rows, int steps_in_flight);

 private:
  // The host implementation's queued steps (the sampling runs in queue_sample).
  std::deque<std::vector<std::int32_t>> queued_;
  std::vector<std::int32_t> last_queued_;
};

}  // namespace rf
