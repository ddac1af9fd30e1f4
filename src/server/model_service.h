#pragma once
// The loaded model as the HTTP layer serves it: its public name, tokenizer and chat template,
// its sampling defaults, and the scheduler that runs its requests.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "server/chat_prompt.h"
#include "tokenizer/fill_in_middle.h"

namespace rf::server {

class ModelService {
 public:
  ModelService(std::unique_ptr<ModelRunner> runner, std::string id, const SchedulerOptions& options);

  const std::string& id() const { return id_; }
  // Names a request may use for this model: its id or the path it was loaded from.
  bool answers_to(const std::string& name) const { return name == id_ || name == runner_->checkpoint().path(); }
  std::int64_t created() const { return created_; }
  const Tokenizer& tokenizer() const { return runner_->tokenizer(); }
  const GenerationDefaults& defaults() const { return runner_->checkpoint().generation_defaults(); }
  const ChatPrompt* chat() const { return chat_ ? &*chat_ : nullptr; }
  // The fill-in-the-middle tokens, for a completion's suffix; nullopt where the vocabulary has none.
  const std::optional<FimTokens>& fim() const { return fim_; }
  Scheduler& scheduler() { return scheduler_; }
  std::size_t hidden_size() const { return runner_->config().hidden_size; }
  // How /v1/embeddings pools this model (engine/embedding.h); rf::Error for a pooling it lacks.
  EmbeddingStyle embedding_style() const { return rf::embedding_style(runner_->checkpoint()); }
  int max_context() const { return scheduler_.max_context(); }

  // Queues a request; ApiError 400 for one that can never run, 429 when the queue is full.
  std::shared_ptr<RequestChannel> submit(GenerationRequest request);
  // Queues one call's requests all or none (Scheduler::submit_all), with submit()'s errors.
  std::vector<std::shared_ptr<RequestChannel>> submit_all(std::vector<GenerationRequest> requests);
  int capacity() const { return scheduler_.capacity(); }  // requests running and waiting at most

  // A grammar for constrained decoding, compiled for this model's vocabulary; requests with the
  // same grammar share one (and its cache of masks). rf::Error for a grammar that does not parse.
  std::shared_ptr<const grammar::TokenGrammar> grammar(const std::string& gbnf);

 private:
  std::unique_ptr<ModelRunner> runner_;
  std::string id_;
  std::int64_t created_;
  std::optional<ChatPrompt> chat_;
  std::optional<FimTokens> fim_;
  std::mutex grammars_mutex_;
  std::map<std::string, std::shared_ptr<const grammar::TokenGrammar>> grammars_;  // by GBNF text
  Scheduler scheduler_;  // last: it stops before the runner goes
};

}  // namespace rf::server
