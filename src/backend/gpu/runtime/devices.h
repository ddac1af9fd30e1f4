#pragma once
// Which GPUs this build can use. Finding none (no device, no driver) is an answer, not an error.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "util/memory_bound.h"

namespace rf::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3", "AMD Instinct MI210", ...
  std::string arch;          // "sm_90", "gfx90a:sramecc+:xnack-", ...
  std::size_t total_memory = 0;
  int warp_size = 0;
  int multiprocessors = 0;   // SMs (NVIDIA) or compute units (AMD)
};

struct DeviceScan {
  std::vector<DeviceInfo> devices;
  std::string why_none;  // when devices is empty: the runtime's reason, for the user
};

// Lists the devices of this build's backend (see backend_name() in vendor.h).
DeviceScan scan_devices();

// Bounds the device memory rocmforge's own buffers (DeviceMemory) take on each device, from then on.
// The runtime's context and its libraries' handles lie outside it. By default nothing is bounded.
void set_memory_bound(const MemoryBound& bound);

struct MemoryUse {
  std::size_t free = 0;   // as the runtime sees it: what other processes hold is not free
  std::size_t total = 0;
  std::size_t held = 0;   // by rocmforge's buffers (DeviceMemory)
  std::size_t bound = 0;  // what the MemoryBound lets them hold in all; total when unbounded
  // What a new buffer may take: free memory, within the bound.
  std::size_t room() const { return std::min(free, bound > held ? bound - held : 0); }
};
MemoryUse memory_use(int index);

// "1.50 GiB": how memory is told to the user.
std::string gib(std::size_t bytes);

}  // namespace rf::gpu
