#pragma once
// The CPU's all-reduce for tensor parallelism's ranks (models/llama/tensor_split.h), one thread each:
// every rank's values added up in rank order, so that every rank gets the same bits.
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <span>
#include <vector>

namespace rf::cpu {

class RankSum {
 public:
  explicit RankSum(int ranks);

  // Waits for every rank's call (values of one length), then leaves the sum in each rank's values.
  // Throws rf::Error once abort() was called.
  void sum(int rank, std::span<float> values);
  // Releases the ranks waiting (a rank failed: the others would wait for it for ever).
  void abort();

 private:
  void wait_for_all(std::unique_lock<std::mutex>& lock);

  int ranks_;
  std::mutex mutex_;
  std::condition_variable arrived_all_;
  std::vector<std::span<float>> values_;
  std::vector<std::vector<float>> totals_;  // each rank's sum as it adds it up, kept between calls
  int arrived_ = 0;
  std::size_t round_ = 0;
  bool aborted_ = false;
};

}  // namespace rf::cpu
