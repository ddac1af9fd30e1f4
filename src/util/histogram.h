#pragma once
// A thread-safe histogram over fixed bucket bounds, as Prometheus exposes them: cumulative counts
// per upper bound, the sum and the count. Quantiles are estimated from the buckets.
#include <cstdint>
#include <mutex>
#include <vector>

namespace rf {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<std::uint64_t> cumulative;  // observations <= each bound; the last entry is +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
};

}  // namespace rf
