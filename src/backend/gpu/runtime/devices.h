#pragma once
// Which GPUs this build can use. Finding none (no device, no driver) is an answer, not an error.
#include <cstddef>
#include <string>
#include <vector>

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

struct MemoryUse {
  std::size_t free = 0;
  std::size_t total = 0;
};
// Device `index`'s memory as its runtime sees it: what other processes hold is not free.
MemoryUse memory_use(int index);

// "1.50 GiB": how memory is told to the user.
std::string gib(std::size_t bytes);

}  // namespace rf::gpu
