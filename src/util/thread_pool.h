#pragma once
// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into
// contiguous chunks, runs them on the workers and the calling thread, and returns when all are done.
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rf {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over chunks of [0, n); chunks hold at least `grain` items.
  void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t job_n_ = 0;
  std::size_t chunks_ = 0;
  std::size_t next_chunk_ = 0;
  std::size_t chunks_done_ = 0;
  std::size_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace rf
