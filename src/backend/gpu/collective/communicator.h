#pragma once
// A GPU's place in a group that adds up buffers across GPUs (tensor parallelism's all-reduce),
// through the vendor's collectives library: NCCL on CUDA, RCCL on HIP (host code only). A build
// without one (HIP where CMake found no RCCL) has collectives_library() empty and makes no group.
// Small messages, where the devices reach each other's memory, take the one-shot kernel instead
// (peer_all_reduce.h), which measured faster (docs/perf.md); ROCMFORGE_PEER_ALL_REDUCE=0 in the
// environment leaves every message to the library, to measure one against the other.
//
// A rank that fails mid-step leaves its peers waiting in a collective for ever: whoever sees the
// failure calls abort() on every communicator of the group, which ends their pending collectives
// (the waiting ranks' streams then fail), and the group is not used again.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/gpu/collective/peer_all_reduce.h"
#include "backend/gpu/runtime/device_context.h"

struct ncclComm;  // NCCL's and RCCL's communicator (ncclComm_t), kept out of this header

namespace rf::gpu {

class Communicator {
 public:
  // One communicator per device, the group of this process's threads: rank i on devices[i]. Fails
  // (rf::Error) naming the library's error, or where the build has no collectives library.
  static std::vector<std::unique_ptr<Communicator>> local_group(std::span<const int> devices);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Adds up `count` floats at `data` (on this rank's device) over the group, in place, queued on the
  // context's stream; captured into a graph when the stream is capturing. Every rank calls it alike.
  void all_reduce_sum(float* data, std::size_t count, const DeviceContext& ctx) const;
  // Ends the communicator's pending collectives; any thread may call it.
  void abort();

 private:
  Communicator(ncclComm* comm, std::unique_ptr<PeerRank> peer) : comm_(comm), peer_(std::move(peer)) {}

  ncclComm* comm_;
  std::unique_ptr<PeerRank> peer_;  // the one-shot kernel's buffers, where the devices reach each other
};

// "NCCL 2.28.9" (or RCCL's), or "" where the build has no collectives library.
std::string collectives_library();

}  // namespace rf::gpu
