#pragma once
// rbee's jobs: POST /v1/jobs starts one and names it; GET /v1/jobs/{id}/stream reads it (once);
// DELETE /v1/jobs/{id} cancels it. A job nobody comes to read is cancelled after a while. Channel
// is what the engine streams the job through (a text generation's or an image job's), which has
// cancel().
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rf::server {

// "job-" and a random (version 4) UUID.
std::string new_job_id();

template <class Channel>
struct Job {
  std::string id;
  std::string model;
  std::shared_ptr<Channel> channel;
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();
  bool claimed = false;  // a reader has its stream
};

template <class Channel>
class JobRegistry {
 public:
  explicit JobRegistry(std::chrono::seconds unclaimed_ttl = std::chrono::minutes(5)) : unclaimed_ttl_(unclaimed_ttl) {}

  std::string add(std::string model, std::shared_ptr<Channel> channel) {
    auto job = std::make_shared<Job<Channel>>(Job<Channel>{new_job_id(), std::move(model), std::move(channel)});
    std::lock_guard lock(mutex_);
    expire_unclaimed();
    jobs_.emplace(job->id, job);
    return job->id;
  }

  // The job for its one reader; null if there is no such job or it is already being read.
  std::shared_ptr<Job<Channel>> claim(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->claimed) return nullptr;
    it->second->claimed = true;
    return it->second;
  }

  bool cancel(const std::string& id) {  // false if there is no such job
    std::lock_guard lock(mutex_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return false;
    it->second->channel->cancel();
    // A stream being read reports the cancellation and removes the job itself.
    if (!it->second->claimed) jobs_.erase(it);
    return true;
  }

  void remove(const std::string& id) {  // its stream has ended
    std::lock_guard lock(mutex_);
    jobs_.erase(id);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return jobs_.size();
  }

 private:
  void expire_unclaimed() {  // with the lock held
    const auto cutoff = std::chrono::steady_clock::now() - unclaimed_ttl_;
    std::erase_if(jobs_, [&](const auto& entry) {
      const Job<Channel>& job = *entry.second;
      if (job.claimed || job.created > cutoff) return false;
      job.channel->cancel();
      return true;
    });
  }

  std::chrono::seconds unclaimed_ttl_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Job<Channel>>> jobs_;
};

}  // namespace rf::server
