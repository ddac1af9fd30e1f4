#include "server/model_service.h"

#include "server/api_error.h"
#include "util/error.h"

namespace rf::server {

ModelService::ModelService(std::unique_ptr<ModelRunner> runner, std::string id, const SchedulerOptions& options)
    : runner_(std::move(runner)),
      id_(std::move(id)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      chat_(ChatPrompt::load(runner_->checkpoint(), runner_->tokenizer())),
      scheduler_(*runner_, options) {}

std::shared_ptr<RequestChannel> ModelService::submit(GenerationRequest request) {
  const std::size_t prompt_tokens = request.prompt.size();
  std::shared_ptr<RequestChannel> channel;
  try {
    channel = scheduler_.submit(std::move(request));
  } catch (const Error& e) {
    const bool too_long = prompt_tokens >= static_cast<std::size_t>(scheduler_.max_context());
    throw ApiError(400, e.what(), "", too_long ? "context_length_exceeded" : "");
  }
  if (!channel) throw ApiError(429, "the server is busy: too many requests are waiting; retry later", "", "queue_full");
  return channel;
}

}  // namespace rf::server
