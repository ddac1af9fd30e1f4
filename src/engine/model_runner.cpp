#include "engine/model_runner.h"

#include <algorithm>

#include "engine/backend_select.h"
#include "formats/gguf.h"
#include "util/error.h"

namespace rf {

namespace {

Tokenizer load_tokenizer(const Checkpoint& ckpt) {
  if (ckpt.gguf()) return Tokenizer::from_gguf(*ckpt.gguf());
  return Tokenizer::from_json_file(ckpt.tokenizer_json());
}

int choose_ctx_size(const ModelConfig& config, int requested) {
  if (requested < 0) fail("context size must be positive, got {}", requested);
  return requested == 0 ? default_ctx_size(config) : requested;
}

// --tensor-parallel, or the count of --devices where only they are given.
int ranks(const RunnerOptions& options) {
  if (options.tensor_parallel < 1) fail("--tensor-parallel must be at least 1, got {}", options.tensor_parallel);
  if (options.tensor_parallel == 1 && !options.devices.empty()) return static_cast<int>(options.devices.size());
  return options.tensor_parallel;
}

}  // namespace

int default_ctx_size(const ModelConfig& config) {
  return std::min(config.max_position_embeddings, 4096);
}

ModelRunner::ModelRunner(const std::string& model_path, const RunnerOptions& options)
    : ModelRunner(Checkpoint::load(model_path), std::nullopt, options) {
  tokenizer_ = load_tokenizer(checkpoint_);
  if (static_cast<std::size_t>(config().vocab_size) < tokenizer_->vocab_size()) {
    fail("{}: the tokenizer has {} tokens but the model only {}", model_path, tokenizer_->vocab_size(), config().vocab_size);
  }
  for (auto id : tokenizer_->eog_ids()) {
    if (std::find(stop_ids_.begin(), stop_ids_.end(), id) == stop_ids_.end()) stop_ids_.push_back(id);
  }
}

ModelRunner::ModelRunner(Checkpoint checkpoint, std::optional<Tokenizer> tokenizer, const RunnerOptions& options)
    : options_(options),
      checkpoint_(std::move(checkpoint)),
      tokenizer_(std::move(tokenizer)),
      ctx_size_(choose_ctx_size(checkpoint_.config(), options.ctx_size)),
      pool_(options.threads),
      forward_(make_forward_pass(options.device, checkpoint_, pool_,
                                 {.block_size = kBlockSize,
                                  .kv_blocks = (std::max(ctx_size_, options.kv_cache_tokens) + kBlockSize - 1) / kBlockSize,
                                  .max_context = ctx_size_,
                                  .max_batch_tokens = options.max_batch_tokens,
                                  .batch_invariant = options.batch_invariant,
                                  .tensor_parallel = ranks(options),
                                  .devices = options.devices},
                                 options.load_progress)),
      blocks_(forward_->kv_blocks()) {
  if (options.max_batch_tokens <= 0) fail("batch size must be positive, got {}", options.max_batch_tokens);
  stop_ids_ = config().eos_token_ids;
}

const Tokenizer& ModelRunner::tokenizer() const {
  if (!tokenizer_) fail("{} has no tokenizer", checkpoint_.path());
  return *tokenizer_;
}

std::shared_ptr<const grammar::VocabTrie> ModelRunner::grammar_vocabulary() const {
  std::call_once(grammar_vocabulary_once_, [&] {
    grammar_vocabulary_ = std::make_shared<grammar::VocabTrie>(tokenizer().token_pieces(), stop_ids_);
  });
  return grammar_vocabulary_;
}


}  // namespace rf
