#include "util/histogram.h"

#include <algorithm>

namespace rf {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double value) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s{bounds_, {}, 0, 0};
  std::lock_guard lock(mutex_);
  std::uint64_t running = 0;
  for (auto c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = running;
  return s;
}

}  // namespace rf
