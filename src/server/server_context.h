#pragma once
// What the route handlers share: the model once it has loaded (a language model or an image model:
// one process serves one), the rbee jobs, the request counters for /metrics, and whether the
// server is stopping.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/image_worker.h"
#include "server/image_service.h"
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
  std::shared_ptr<ModelService> model() const;  // null while loading or serving an image model
  // ApiError 503 while loading, 400 while serving an image model.
  std::shared_ptr<ModelService> require_model() const;
  void set_model(std::shared_ptr<ModelService> model);
  std::shared_ptr<ModelService> take_model();  // at shutdown

  std::shared_ptr<ImageService> image_model() const;  // null while loading or serving a language model
  // ApiError 503 while loading, 400 while serving a language model.
  std::shared_ptr<ImageService> require_image_model() const;
  void set_image_model(std::shared_ptr<ImageService> model);
  std::shared_ptr<ImageService> take_image_model();
  bool loaded() const { return model() || image_model(); }

  bool stopping() const { return stopping_; }
  void begin_stopping() { stopping_ = true; }

  JobRegistry<RequestChannel> jobs;
  JobRegistry<ImageJob> image_jobs;
  RequestCounters counters;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ModelService> model_;
  std::shared_ptr<ImageService> image_model_;
  std::atomic<bool> stopping_{false};
};

}  // namespace rf::server
