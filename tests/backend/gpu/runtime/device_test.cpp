#include <cmath>

#include "backend/gpu/runtime/devices.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class Device : public GpuTest {};

TEST_F(Device, ScanDescribesEachDevice) {
  const DeviceScan scan = scan_devices();
  ASSERT_FALSE(scan.devices.empty());
  for (const auto& d : scan.devices) {
    std::printf("[  device  ] %d: %s (%s), %.1f GiB, warp %d, %d multiprocessors\n", d.index, d.name.c_str(),
                d.arch.c_str(), d.total_memory / double(1u << 30), d.warp_size, d.multiprocessors);
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory, 0u);
    EXPECT_TRUE(d.warp_size == 32 || d.warp_size == 64) << d.warp_size;
  }
}

TEST_F(Device, BufferRoundTripAndPoison) {
  const auto host = random_floats(1001);
  DeviceBuffer<float> buffer(host);
  EXPECT_EQ(buffer.download(), host);
  buffer.poison();
  for (float v : buffer.download()) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace rf::gpu::test
