#pragma once
// A loaded model ready to run: checkpoint, tokenizer, the backend's forward pass and its paged
// KV cache with the block allocator. The engine's generation and scoring loops drive it.
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/block_allocator.h"
#include "grammar/token_constraint.h"
#include "model/checkpoint.h"
#include "model/forward_pass.h"
#include "tokenizer/tokenizer.h"
#include "util/progress_meter.h"
#include "util/thread_pool.h"

namespace rf {

struct RunnerOptions {
  int threads = 0;         // 0: one per hardware thread
  int ctx_size = 0;        // positions one sequence may use; 0: the model's context, at most 4096
  int kv_cache_tokens = 0;  // positions the KV cache holds for all sequences together; at least ctx_size
  int max_batch_tokens = 512;  // prompts longer than this are prefilled in chunks
  std::string device = "auto";  // auto, cpu, cuda or rocm (see engine/backend_select.h)
  bool batch_invariant = false;  // GPU: see BackendShape::batch_invariant
  int tensor_parallel = 1;       // ranks (see BackendShape::tensor_parallel); --devices alone sets it
  std::vector<int> devices = {};  // the ranks' GPUs (BackendShape::devices)
  ProgressFn load_progress = {};  // told the weights' bytes read in (CPU) or uploaded (GPU)
};

// The context a runner gets when none is asked for: the model's, capped at 4096 to bound memory.
int default_ctx_size(const ModelConfig& config);

class ModelRunner {
 public:
  static constexpr int kBlockSize = 16;

  // Loads a checkpoint (folder or .gguf) with its tokenizer.
  ModelRunner(const std::string& model_path, const RunnerOptions& options);
  // Runs a checkpoint already in memory; without a tokenizer, only token ids go in and out.
  ModelRunner(Checkpoint checkpoint, std::optional<Tokenizer> tokenizer, const RunnerOptions& options);

  const Checkpoint& checkpoint() const { return checkpoint_; }
  const ModelConfig& config() const { return checkpoint_.config(); }
  const Tokenizer& tokenizer() const;  // throws if the model came without one
  int ctx_size() const { return ctx_size_; }
  int max_batch_tokens() const { return options_.max_batch_tokens; }
  BlockAllocator& blocks() { return blocks_; }

  // One forward step; logits has batch.logit_rows.size() rows of vocab_size.
  void forward(const Batch& batch, std::vector<float>& logits) { forward_->forward(batch, logits); }
  // One forward step; states has each logit row's final hidden state (see ForwardPass::hidden_states).
  void hidden_states(const Batch& batch, std::vector<float>& states) { forward_->hidden_states(batch, states); }
  // One forward step and the next token of each logit row (see ForwardPass::sample).
  std::vector<std::int32_t> sample(const Batch& batch, std::span<const SampleRow> rows) { return forward_->sample(batch, rows); }
  // Decoding ahead (see ForwardPass::queue_sample).
  void queue_sample(const Batch& batch, std::span<const SampleRow> rows) { forward_->queue_sample(batch, rows); }
  std::vector<std::int32_t> take_tokens() { return forward_->take_tokens(); }
  ForwardPass& backend() { return *forward_; }
  // The CPU backend's workers; free for other host work between steps (never during one).
  ThreadPool& pool() { return pool_; }
  const ForwardPass& backend() const { return *forward_; }

  // Ids that end a generation: the tokenizer's end-of-generation tokens and the config's eos ids.
  const std::vector<std::int32_t>& stop_ids() const { return stop_ids_; }
  // The tokenizer's tokens as constrained decoding walks them, built on first use (any thread).
  std::shared_ptr<const grammar::VocabTrie> grammar_vocabulary() const;

 private:
  RunnerOptions options_;
  Checkpoint checkpoint_;
  std::optional<Tokenizer> tokenizer_;
  int ctx_size_;
  ThreadPool pool_;
  std::unique_ptr<ForwardPass> forward_;
  BlockAllocator blocks_;
  std::vector<std::int32_t> stop_ids_;
  mutable std::once_flag grammar_vocabulary_once_;
  mutable std::shared_ptr<const grammar::VocabTrie> grammar_vocabulary_;
};

}  // namespace rf
