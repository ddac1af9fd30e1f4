#include "server/model_service.h"

#include <algorithm>

#include "grammar/gbnf.h"
#include "server/api_error.h"
#include "util/error.h"

namespace rf::server {

namespace {
constexpr std::size_t kMostGrammars = 64;  // compiled grammars kept for reuse
}

ModelService::ModelService(std::unique_ptr<ModelRunner> runner, std::string id, const SchedulerOptions& options)
    : runner_(std::move(runner)),
      id_(std::move(id)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      chat_(ChatPrompt::load(runner_->checkpoint(), runner_->tokenizer())),
      fim_(fim_tokens(runner_->tokenizer())),
      scheduler_(*runner_, options) {}

std::shared_ptr<RequestChannel> ModelService::submit(GenerationRequest request) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  return std::move(submit_all(std::move(one)).front());
}

std::vector<std::shared_ptr<RequestChannel>> ModelService::submit_all(std::vector<GenerationRequest> requests) {
  std::size_t longest_prompt = 0;
  for (const auto& request : requests) longest_prompt = std::max(longest_prompt, request.prompt.size());
  std::vector<std::shared_ptr<RequestChannel>> channels;
  try {
    channels = scheduler_.submit_all(std::move(requests));
  } catch (const Error& e) {
    const bool too_long = longest_prompt >= static_cast<std::size_t>(scheduler_.max_context());
    throw ApiError(400, e.what(), "", too_long ? "context_length_exceeded" : "");
  }
  if (channels.empty()) throw ApiError(429, "the server is busy: too many requests are waiting; retry later", "", "queue_full");
  return channels;
}

std::shared_ptr<const grammar::TokenGrammar> ModelService::grammar(const std::string& gbnf) {
  {
    std::lock_guard lock(grammars_mutex_);
    if (const auto it = grammars_.find(gbnf); it != grammars_.end()) return it->second;
  }
  // Built outside the lock: a large grammar or the first vocabulary walk takes a while.
  auto compiled = std::make_shared<const grammar::TokenGrammar>(grammar::parse_gbnf(gbnf), runner_->grammar_vocabulary());
  std::lock_guard lock(grammars_mutex_);
  if (grammars_.size() >= kMostGrammars) grammars_.clear();  // requests in flight keep theirs
  return grammars_.emplace(gbnf, std::move(compiled)).first->second;
}

}  // namespace rf::server
