#pragma once
// The all-reduce of small messages (a decode step's partial hidden states) in one kernel over peer
// memory (NVLink, xGMI), as vLLM's and TensorRT-LLM's one-shot all-reduces do: each rank pushes its
// values into every rank's inbox, raises a flag in every peer's memory, waits for every peer's flag in
// its own, and adds up its inbox in rank order (so every rank gets the same bits). Unlike NCCL's, it
// is launched as the kernels around it are, overlapping their edges (docs/perf.md measures both).
//
// The kernel runs with a fixed grid, and chunk c of any message belongs to block c % grid in every
// call: a block's flags then cover every value it pushes or reads. Inboxes alternate between two
// halves by the call's parity, so a rank may push call k + 2 only after its peers have raised call
// k + 1's flags, which each raises after reading call k's values: no barrier at the end. The flags
// count calls (the epoch, kept per block in the rank's memory), so graphs replay the launch as it is.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/host_staging.h"

namespace rf::gpu {

inline constexpr int kPeerMostRanks = 8;
inline constexpr int kPeerBlocks = 32;
inline constexpr std::size_t kPeerMostValues = std::size_t{1} << 18;  // 1 MiB of floats a message

// What one rank's launch reads: every rank's buffers, by the address this rank's device sees them at.
struct PeerGroupView {
  // Rank r's inbox: [parity][from rank][kPeerMostValues] floats.
  float* inboxes[kPeerMostRanks];
  // Rank r's flags, [block][from rank]: the epoch up to which `from` has pushed that block's values.
  std::uint32_t* flags[kPeerMostRanks];
  std::uint32_t* epochs;  // this rank's calls so far, per block
  // Set (page-locked host memory, which the devices read) when a rank failed: a kernel waiting for a
  // flag that will never come returns then, with its sum unfinished.
  const std::uint32_t* aborted;
  int rank = 0;
  int ranks = 0;
};

// One rank's part of a group: its inbox and flags (on its device), and its launches' view.
struct PeerRank {
  DeviceBuffer<float> inbox;            // 2 * ranks * kPeerMostValues
  DeviceBuffer<std::uint32_t> signals;  // flags [kPeerBlocks][kPeerMostRanks], then epochs [kPeerBlocks]
  std::shared_ptr<PinnedBuffer<std::uint32_t>> aborted;  // the group's one word
  PeerGroupView view;

  // Releases every rank's kernel waiting on a peer (any thread may call it).
  void abort() { *static_cast<volatile std::uint32_t*>(aborted->data()) = 1; }
};

// Every rank's part, each on its device, peer access enabled between every two of them; empty where
// some device cannot reach another's memory (then NCCL serves every message).
std::vector<std::unique_ptr<PeerRank>> make_peer_group(std::span<const int> devices);

// Whether the one-shot kernel takes a message of `count` floats: whole float4s, at most kPeerMostValues.
inline bool peer_all_reduce_takes(std::size_t count) { return count % 4 == 0 && count <= kPeerMostValues; }

// Adds up `count` floats at `data` over the group, in place, on the context's stream; every rank
// launches it with the same count, in the same order of calls.
void launch_peer_all_reduce(const PeerGroupView& group, float* data, std::size_t count, const DeviceContext& ctx);

}  // namespace rf::gpu
