// The one-shot all-reduce over peer memory (backend/gpu/collective/peer_all_reduce.h): every rank
// gets the host's sum in rank order, bit for bit, over calls of changing sizes (which move values
// between the blocks' chunks and the inboxes' parities), and an abort releases a rank whose
// peer never comes. Two ranks on two GPUs where the machine has them, else both on GPU 0 (two
// streams, the kernels resident together).
#include <thread>

#include "backend/gpu/collective/peer_all_reduce.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/runtime/devices.h"

namespace rf::gpu::test {
namespace {

class PeerAllReduce : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
#if defined(__HIP_CPU_RT__)
    GTEST_SKIP() << "HIP-CPU runs one kernel at a time; two ranks waiting on each other would wait for ever";
#endif
    const int count = static_cast<int>(scan_devices().devices.size());
    devices_ = count >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
    group_ = make_peer_group(devices_);
    if (group_.empty()) GTEST_SKIP() << "GPUs 0 and 1 cannot reach each other's memory";
    for (int d : devices_) contexts_.push_back(std::make_unique<DeviceContext>(d));
  }

  std::vector<int> devices_;
  std::vector<std::unique_ptr<PeerRank>> group_;
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
};

TEST_F(PeerAllReduce, EveryRankGetsTheSumInRankOrder) {
  fmt::print("ranks on devices {} and {}\n", devices_[0], devices_[1]);
  // One token of an 8B model's hidden state, a few odd sizes, 32 tokens' and the largest message.
  for (const std::size_t count : {4096ul, 4ul, 20484ul, 131072ul, 4096ul, kPeerMostValues, 2052ul}) {
    std::vector<std::vector<float>> values = {random_floats(count), random_floats(count)};
    std::vector<float> want(count);
    for (std::size_t i = 0; i < count; ++i) want[i] = values[0][i] + values[1][i];
    std::vector<std::vector<float>> got(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        const ContextScope scope(*contexts_[r]);
        DeviceBuffer<float> data(values[r]);
        launch_peer_all_reduce(group_[r]->view, data.data(), count, *contexts_[r]);
        contexts_[r]->synchronize();
        got[r] = data.download();
      });
    }
    for (auto& t : ranks) t.join();
    const std::vector<std::uint32_t> want_bits = bits(want);
    for (int r = 0; r < 2; ++r) {
      const std::vector<std::uint32_t> got_bits = bits(got[r]);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < count; ++i) differ += got_bits[i] != want_bits[i];
      fmt::print("{} values, rank {}: {} differ from the host's sum (tolerance 0)\n", count, r, differ);
      EXPECT_EQ(differ, 0u);
    }
  }
}

TEST_F(PeerAllReduce, AbortReleasesARankWhosePeerNeverComes) {
  const ContextScope scope(*contexts_[0]);
  DeviceBuffer<float> data(random_floats(4096));
  launch_peer_all_reduce(group_[0]->view, data.data(), 4096, *contexts_[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  group_[0]->abort();
  contexts_[0]->synchronize();  // returns: the kernel gave up waiting
  SUCCEED() << "rank 0 returned after the abort";
}

}  // namespace
}  // namespace rf::gpu::test
