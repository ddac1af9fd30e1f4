#pragma once
// A bound on the device memory rocmforge takes (--gpu-memory), as users write it: a share of each
// device's memory ("0.9") or a size ("20GiB", "512MiB", "24GB").
#include <cstdint>
#include <string>

namespace rf {

struct MemoryBound {
  double share = 1.0;       // of the device's total, where bytes is 0
  std::uint64_t bytes = 0;
  bool bounds_anything() const { return bytes > 0 || share < 1.0; }
};

// Throws rf::Error naming the value and the forms it may take (the option's name is the caller's).
MemoryBound parse_memory_bound(const std::string& value);

}  // namespace rf
