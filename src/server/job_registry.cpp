#include "server/job_registry.h"

#include <atomic>
#include <random>

#include <fmt/format.h>

namespace rf::server {

std::string JobRegistry::add(std::string model, std::shared_ptr<RequestChannel> channel) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  auto job = std::make_shared<Job>(Job{fmt::format("job-{:08x}-{}", salt & 0xffffffff, ++counter), std::move(model), std::move(channel)});
  std::lock_guard lock(mutex_);
  expire_unclaimed();
  jobs_.emplace(job->id, job);
  return job->id;
}

std::shared_ptr<Job> JobRegistry::claim(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->claimed) return nullptr;
  it->second->claimed = true;
  return it->second;
}

bool JobRegistry::cancel(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  it->second->channel->cancel();
  // A stream being read reports the cancellation and removes the job itself.
  if (!it->second->claimed) jobs_.erase(it);
  return true;
}

void JobRegistry::remove(const std::string& id) {
  std::lock_guard lock(mutex_);
  jobs_.erase(id);
}

void JobRegistry::expire_unclaimed() {
  const auto cutoff = std::chrono::steady_clock::now() - unclaimed_ttl_;
  std::erase_if(jobs_, [&](const auto& entry) {
    const Job& job = *entry.second;
    if (job.claimed || job.created > cutoff) return false;
    job.channel->cancel();
    return true;
  });
}

}  // namespace rf::server
