#include "backend/cpu/rank_sum.h"

#include "util/error.h"

namespace rf::cpu {

RankSum::RankSum(int ranks) : ranks_(ranks), values_(ranks), totals_(ranks) {}

void RankSum::sum(int rank, std::span<float> values) {
  std::vector<float>& total = totals_[rank];
  total.assign(values.size(), 0.0f);
  std::unique_lock lock(mutex_);
  values_[rank] = values;
  wait_for_all(lock);  // every rank's values are in
  lock.unlock();
  for (const std::span<float> part : values_) {
    if (part.size() != total.size()) fail("tensor parallelism: ranks summed {} and {} values", part.size(), total.size());
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += part[i];
  }
  lock.lock();
  wait_for_all(lock);  // every rank has read them all
  lock.unlock();
  std::copy(total.begin(), total.end(), values.begin());
}

void RankSum::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  arrived_all_.notify_all();
}

void RankSum::wait_for_all(std::unique_lock<std::mutex>& lock) {
  const std::size_t round = round_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++round_;
    arrived_all_.notify_all();
  } else {
    arrived_all_.wait(lock, [&] { return round_ != round || aborted_; });
  }
  if (aborted_) fail("tensor parallelism: another rank failed");
}

}  // namespace rf::cpu
