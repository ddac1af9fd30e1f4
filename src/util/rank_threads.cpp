#include "util/rank_threads.h"

namespace rf {

RankThreads::RankThreads(int ranks, std::function<void()> on_failure)
    : on_failure_(std::move(on_failure)) {
  for (int r = 0; r < ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void RankThreads::run(const std::function<void(int rank)>& fn) {
  std::unique_lock lock(mutex_);
  job_ = &fn;
  running_ = size();
  first_error_ = nullptr;
  ++generation_;
  work_ready_.notify_all();
  work_done_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  if (first_error_) std::rethrow_exception(first_error_);
}

void RankThreads::loop(int rank) {
  std::size_t seen = 0;
  std::unique_lock lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<void(int)>& job = *job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      job(rank);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !first_error_) {
      first_error_ = error;
      if (on_failure_) {
        lock.unlock();
        on_failure_();
        lock.lock();
      }
    }
    if (--running_ == 0) work_done_.notify_one();
  }
}

}  // namespace rf
