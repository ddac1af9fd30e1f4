#pragma once
// Continuous batching over one ModelRunner, vLLM-style. Requests arrive from any thread through
// submit() and stream their results back through a RequestChannel; one engine thread owns the
// runner and, each step, runs every decoding sequence's next token together with chunks of the
// prompts being prefilled (up to a token budget), admits waiting requests while the paged KV
// cache has room, and retires finished, failed and cancelled ones, freeing their blocks. When
// the cache runs out mid-generation, the newest sequence is preempted: its blocks are freed and
// it waits to be recomputed, keeping its sampler state, so nothing is lost but time.
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/active_sequence.h"
#include "engine/embedding.h"
#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "model/batch.h"

namespace rf {

class ModelRunner;

struct SchedulerOptions {
  int max_context = 0;   // positions one sequence may use; 0: the runner's context
  int max_running = 64;  // sequences in the batch at once
  int max_queued = 256;  // requests waiting beyond the max_running that run (0: none wait); submit() refuses more
  int step_tokens = 0;   // tokens per forward step (at least max_running); 0: the runner's batch size
  bool prefix_caching = true;
};

class Scheduler {
 public:
  Scheduler(ModelRunner& runner, const SchedulerOptions& options);
  ~Scheduler();  // stops the engine thread; requests still in flight get a Failed event
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws rf::Error for one that can never run (empty, too long, bad
  // sampling values); returns null when the queue is full.
  std::shared_ptr<RequestChannel> submit(GenerationRequest request);
  // Queues one call's requests (a client's prompts times n) all or none: each is checked as
  // submit() checks it before any is queued, and none is when the queue lacks room for all, so
  // that an oversized call never holds places it cannot use (the result is then empty).
  std::vector<std::shared_ptr<RequestChannel>> submit_all(std::vector<GenerationRequest> requests);

  // Queues an embedding of `tokens`: their final hidden states, pooled. It runs on the engine
  // thread between generation steps, batched with the other embeddings waiting (up to step_tokens
  // tokens a step; a longer text over several). Throws rf::Error for tokens that can never run;
  // an invalid future when the queue is full. The future throws rf::Error if the step fails.
  std::future<std::vector<float>> embed(std::vector<std::int32_t> tokens, Pooling pooling, bool normalize);

  int max_context() const { return options_.max_context; }
  int max_running() const { return options_.max_running; }
  int capacity() const { return options_.max_running + options_.max_queued; }  // requests held at once
  const EngineMetrics& metrics() const { return metrics_; }

 private:
  struct EmbeddingJob {
    std::vector<std::int32_t> tokens;
    EmbeddingPooler pooler;
    bool normalize;
    std::promise<std::vector<float>> result;
    std::vector<std::int32_t> block_table;
    std::size_t computed = 0;  // tokens run so far
  };

  struct Scheduled {
    ActiveSequence* sequence;
    std::size_t count;  // tokens it runs this step
  };

  // The checks of submit(), and the sequence it would queue.
  std::unique_ptr<ActiveSequence> admissible(GenerationRequest request,
                                             const std::shared_ptr<RequestChannel>& channel) const;
  void run();
  void run_embeddings();  // one step of the embeddings in hand, if any
  void step();
  void drop_cancelled();
  bool schedule_running(std::vector<Scheduled>& scheduled, int& budget);
  void admit_waiting(std::vector<Scheduled>& scheduled, int& budget);
  // How many of a sequence's next `wanted` tokens the cache has room for, reserving their blocks.
  std::size_t reserve_up_to(ActiveSequence& sequence, std::size_t wanted);
  void preempt_newest();
  void execute(const std::vector<Scheduled>& scheduled);
  void sample_next(const std::vector<Scheduled>& scheduled, const Batch& batch, std::vector<std::int32_t>& next,
                   std::vector<std::optional<TokenLogprobs>>& logprobs);
  void retire(ActiveSequence& sequence);
  void forget(std::size_t sequences);  // they left the engine: room for as many new requests
  void publish_state();

  ModelRunner& runner_;
  SchedulerOptions options_;
  EngineMetrics metrics_;
  std::vector<float> logits_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<ActiveSequence>> incoming_;
  std::deque<std::unique_ptr<EmbeddingJob>> incoming_embeddings_;
  int admitted_ = 0;  // requests submitted and not yet retired or dropped
  bool stopping_ = false;

  // The engine thread's own.
  std::deque<std::unique_ptr<ActiveSequence>> waiting_;    // preempted ones first
  std::vector<std::unique_ptr<ActiveSequence>> running_;  // oldest first
  std::deque<std::unique_ptr<EmbeddingJob>> embeddings_;
  std::vector<float> hidden_;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace rf
