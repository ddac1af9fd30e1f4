// The one-shot all-reduce's buffers (peer_all_reduce.h), one rank's on each device.
#include "backend/gpu/collective/peer_all_reduce.h"
#include "util/error.h"

namespace rf::gpu {

namespace {

bool every_pair_reaches(std::span<const int> devices) {
  for (int a : devices) {
    for (int b : devices) {
      int reaches = 0;
      if (a != b && (gpuDeviceCanAccessPeer(&reaches, a, b) != gpuSuccess || !reaches)) return false;
    }
  }
  return true;
}

// Lets `device` read and write every other device's memory (once per process; again is no error).
void reach_peers(int device, std::span<const int> devices) {
  RF_GPU_CHECK(gpuSetDevice(device));
  for (int peer : devices) {
    if (peer == device) continue;
    const gpuError_t status = gpuDeviceEnablePeerAccess(peer, 0);
    if (status == gpuErrorPeerAccessAlreadyEnabled) {
      (void)gpuGetLastError();  // clears it
    } else {
      RF_GPU_CHECK(status);
    }
  }
}

}  // namespace

std::vector<std::unique_ptr<PeerRank>> make_peer_group(std::span<const int> devices) {
  std::vector<std::unique_ptr<PeerRank>> group;
  const int ranks = static_cast<int>(devices.size());
  if (ranks > kPeerMostRanks || !every_pair_reaches(devices)) return group;
  int previous = 0;
  RF_GPU_CHECK(gpuGetDevice(&previous));
  constexpr std::size_t kSignals = kPeerBlocks * kPeerMostRanks + kPeerBlocks;
  auto aborted = std::make_shared<PinnedBuffer<std::uint32_t>>(1);
  *aborted->data() = 0;
  for (int r = 0; r < ranks; ++r) {
    reach_peers(devices[r], devices);  // and makes devices[r] current for the allocations
    auto rank = std::make_unique<PeerRank>(PeerRank{DeviceBuffer<float>(2 * ranks * kPeerMostValues),
                                                     DeviceBuffer<std::uint32_t>(kSignals), aborted, {}});
    RF_GPU_CHECK(gpuMemset(rank->signals.data(), 0, rank->signals.bytes()));
    group.push_back(std::move(rank));
  }
  for (int r = 0; r < ranks; ++r) {
    PeerGroupView& view = group[r]->view;
    for (int peer = 0; peer < ranks; ++peer) {
      view.inboxes[peer] = group[peer]->inbox.data();
      view.flags[peer] = group[peer]->signals.data();
    }
    view.epochs = group[r]->signals.data() + kPeerBlocks * kPeerMostRanks;
    view.aborted = aborted->data();
    view.rank = r;
    view.ranks = ranks;
  }
  RF_GPU_CHECK(gpuSetDevice(previous));
  return group;
}

}  // namespace rf::gpu
