#pragma once
// rbee's jobs: POST /v1/jobs starts a generation and names it; GET /v1/jobs/{id}/stream reads it
// (once); DELETE /v1/jobs/{id} cancels it. A job nobody comes to read is cancelled after a while.
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/request.h"

namespace rf::server {

struct Job {
  std::string id;
  std::string model;
  std::shared_ptr<RequestChannel> channel;
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  bool claimed = false;  // a reader has its stream
};

class JobRegistry {
 public:
  explicit JobRegistry(std::chrono::seconds unclaimed_ttl = std::chrono::minutes(5)) : unclaimed_ttl_(unclaimed_ttl) {}

  std::string add(std::string model, std::shared_ptr<RequestChannel> channel);
  // The job for its one reader; null if there is no such job or it is already being read.
  std::shared_ptr<Job> claim(const std::string& id);
  bool cancel(const std::string& id);  // false if there is no such job
  void remove(const std::string& id);  // its stream has ended

 private:
  void expire_unclaimed();  // with the lock held

  std::chrono::seconds unclaimed_ttl_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
};

}  // namespace rf::server
