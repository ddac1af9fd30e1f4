// The collectives through NCCL (CUDA) or RCCL (HIP), which share NCCL's names.
#include "backend/gpu/collective/communicator.h"

#if defined(ROCMFORGE_GPU_CUDA)
#include <nccl.h>
#else
#include <rccl/rccl.h>
#endif

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "util/error.h"

namespace rf::gpu {

namespace {

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess && result != ncclInProgress) {
    fail("{}: {} failed: {}", collectives_library(), what, ncclGetErrorString(result));
  }
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> Communicator::local_group(std::span<const int> devices) {
  const int size = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(size);
  check(ncclCommInitAll(comms.data(), size, devices.data()), "making the GPUs' communicators (ncclCommInitAll)");
  const char* peer_env = std::getenv("ROCMFORGE_PEER_ALL_REDUCE");
  const bool peer_allowed = !peer_env || std::string_view(peer_env) != "0";
  std::vector<std::unique_ptr<PeerRank>> peers;
  if (peer_allowed) peers = make_peer_group(devices);
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < size; ++r) {
    std::unique_ptr<PeerRank> peer = peers.empty() ? nullptr : std::move(peers[r]);
    group.push_back(std::unique_ptr<Communicator>(new Communicator(comms[r], std::move(peer))));
  }
  return group;
}

Communicator::~Communicator() {
  if (comm_) ncclCommDestroy(comm_);
}

void Communicator::all_reduce_sum(float* data, std::size_t count, const DeviceContext& ctx) const {
  if (!comm_) fail("{}: the communicator was aborted (a rank failed)", collectives_library());
  if (peer_ && peer_all_reduce_takes(count)) return launch_peer_all_reduce(peer_->view, data, count, ctx);
  check(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, ctx.stream()), "all-reduce");
}

void Communicator::abort() {
  if (peer_) peer_->abort();
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

std::string collectives_library() {
  int version = 0;
  ncclGetVersion(&version);
  // NCCL_VERSION(X, Y, Z): X * 10000 + Y * 100 + Z since 2.9.
#if defined(ROCMFORGE_GPU_CUDA)
  const char* name = "NCCL";
#else
  const char* name = "RCCL";
#endif
  return fmt::format("{} {}.{}.{}", name, version / 10000, version / 100 % 100, version % 100);
}

}  // namespace rf::gpu
