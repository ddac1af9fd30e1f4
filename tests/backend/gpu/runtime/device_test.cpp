#include <cmath>
#include <optional>

#include "backend/gpu/runtime/devices.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/support/kernels.h"
#include "util/error.h"

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

// An allocation the device cannot hold is an rf::Error saying how much was asked and free (issue
// #29), and leaves the device usable.
TEST_F(Device, OutOfMemoryIsAnErrorSayingWhatIsFree) {
#if defined(ROCMFORGE_GPU_HIP_CPU)
  GTEST_SKIP() << "HIP-CPU's device memory is the host's, which overcommits rather than refuse";
#endif
  const std::size_t too_much = std::size_t{1} << 44;  // 16 TiB
  try {
    DeviceBuffer<std::uint8_t> buffer(too_much);
    FAIL() << "a 16 TiB allocation succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::printf("[  message ] %s\n", what.c_str());
    EXPECT_NE(what.find("is out of memory: 16384.00 GiB asked"), std::string::npos) << what;
    EXPECT_NE(what.find(" free"), std::string::npos) << what;
  }
  DeviceBuffer<float> after(random_floats(64));
  EXPECT_EQ(after.download().size(), 64u);
}

// Under a bound (--gpu-memory) rocmforge's buffers take no more than it allows: a buffer past it is an
// rf::Error naming the bound, or nullptr from try_allocate, and freeing a buffer makes room again.
TEST_F(Device, TheMemoryBoundRefusesWhatWouldPassIt) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t held = memory_use(0).held;
  set_memory_bound({.bytes = held + 64 * kMiB});
  {
    std::optional<DeviceBuffer<std::uint8_t>> first(48 * kMiB);
    EXPECT_EQ(memory_use(0).held, held + 48 * kMiB);
    EXPECT_EQ(memory_use(0).room(), std::min(memory_use(0).free, 16 * kMiB));
    try {
      DeviceBuffer<std::uint8_t> second(32 * kMiB);
      ADD_FAILURE() << "a buffer past the bound was allocated";
    } catch (const Error& e) {
      std::printf("[  message ] %s\n", e.what());
      EXPECT_NE(std::string(e.what()).find("0.03 GiB asked"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("that --gpu-memory allows"), std::string::npos) << e.what();
    }
    EXPECT_EQ(DeviceMemory::try_allocate(32 * kMiB), nullptr);
    first.reset();
    EXPECT_EQ(memory_use(0).held, held);
    DeviceBuffer<std::uint8_t> fits(32 * kMiB);
    EXPECT_EQ(memory_use(0).held, held + 32 * kMiB);
  }
  set_memory_bound({});
  DeviceBuffer<std::uint8_t> unbounded(128 * kMiB);
  EXPECT_EQ(memory_use(0).bound, memory_use(0).total);
}

// A fault that loses the device's context ends the process with kExitDeviceLost and a message,
// rather than failing every later call (and every request) or hanging. The death test runs in a
// fresh process ("threadsafe"): a forked child cannot use its parent's device context.
TEST_F(Device, ALostContextEndsTheProcessSayingWhy) {
#if defined(ROCMFORGE_GPU_HIP_CPU)
  GTEST_SKIP() << "on HIP-CPU a kernel's bad write is the host process's segmentation fault, not a runtime error";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        launch_illegal_write(ctx());
        synchronize();
      },
      ::testing::ExitedWithCode(kExitDeviceLost), "the GPU failed .*its state is lost, so rocmforge exits");
}

}  // namespace
}  // namespace rf::gpu::test
