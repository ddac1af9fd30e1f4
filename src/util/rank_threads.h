#pragma once
// One thread per rank of a parallel group (tensor parallelism's GPUs), kept for the group's life:
// what runs for rank r always runs on the same thread, as a GPU runtime keeps its current device per
// thread and a rank's work must never wait behind another's.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rf {

class RankThreads {
 public:
  // on_failure is called once, from the thread of the first rank that throws, as soon as it throws:
  // the others may be blocked on that rank (in a collective), and on_failure is what releases them.
  explicit RankThreads(int ranks, std::function<void()> on_failure = {});
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  // Calls fn(rank) on every rank's thread at once and returns when all have returned. If any threw,
  // the first exception thrown (the cause; the others' may be its consequence) is rethrown here.
  void run(const std::function<void(int rank)>& fn);

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::function<void()> on_failure_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int)>* job_ = nullptr;
  std::exception_ptr first_error_;
  std::size_t generation_ = 0;
  int running_ = 0;

  bool stopping_ = false;
};

}  // namespace rf
