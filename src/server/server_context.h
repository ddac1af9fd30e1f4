#pragma once
// What the route handlers share: the model once it has loaded, the rbee jobs, the request
// counters for /metrics, and whether the server is stopping.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "server/job_registry.h"
#include "server/model_service.h"

namespace rf::server {

// HTTP responses by route and status, for /metrics.
class RequestCounters {
 public:
  void count(const std::string& route, int status);
  std::map<std::pair<std::string, int>, std::uint64_t> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> counts_;
};

class ServerContext {
 public:
  std::shared_ptr<ModelService> model() const;  // null while loading
  std::shared_ptr<ModelService> require_model() const;  // ApiError 503 while loading
  void set_model(std::shared_ptr<ModelService> model);
  std::shared_ptr<ModelService> take_model();  // at shutdown

  bool stopping() const { return stopping_; }
  void begin_stopping() { stopping_ = true; }

  JobRegistry jobs;
  RequestCounters counters;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ModelService> model_;
  std::atomic<bool> stopping_{false};
};

}  // namespace rf::server
