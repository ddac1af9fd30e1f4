#include "server/server_context.h"

#include "server/api_error.h"

namespace rf::server {

void RequestCounters::count(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++counts_[{route, status}];
}

std::map<std::pair<std::string, int>, std::uint64_t> RequestCounters::snapshot() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::shared_ptr<ModelService> ServerContext::model() const {
  std::lock_guard lock(mutex_);
  return model_;
}

std::shared_ptr<ModelService> ServerContext::require_model() const {
  auto m = model();
  if (!m) throw ApiError(503, "the model is still loading; retry shortly", "", "model_loading");
  return m;
}

void ServerContext::set_model(std::shared_ptr<ModelService> model) {
  std::lock_guard lock(mutex_);
  model_ = std::move(model);
}

std::shared_ptr<ModelService> ServerContext::take_model() {
  std::lock_guard lock(mutex_);
  return std::move(model_);
}

}  // namespace rf::server
