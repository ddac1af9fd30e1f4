#include "backend/gpu/collective/peer_all_reduce.h"

#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 512;
constexpr std::size_t kChunk = kThreads * 4;  // a block's values at a time: one float4 a thread

__device__ float4 add(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

// The flags' stores and loads: release and acquire at system scope, which order the values a block
// pushed to its peers before its flag, and a peer's pushed values after its flag (PTX on NVIDIA, where
// it measured faster than the full fences of the portable path beside it).
__device__ void raise_flag(std::uint32_t* flag, std::uint32_t epoch) {
#if defined(ROCMFORGE_GPU_CUDA)
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(epoch) : "memory");
#else
  __threadfence_system();
  *static_cast<volatile std::uint32_t*>(flag) = epoch;
#endif
}

__device__ std::uint32_t read_flag(const std::uint32_t* flag) {
#if defined(ROCMFORGE_GPU_CUDA)
  std::uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
#else
  const std::uint32_t value = *static_cast<const volatile std::uint32_t*>(flag);
  __threadfence_system();
  return value;
#endif
}

// Waits until `flag` reaches `epoch` (epochs wrap: compared as a signed difference), or the group is
// aborted, which it reads over the host bus, so only now and then.
__device__ void wait_for(const std::uint32_t* flag, std::uint32_t epoch, const std::uint32_t* aborted) {
  constexpr unsigned kSpinsPerAbortCheck = 4096;
  for (unsigned spins = 1; static_cast<std::int32_t>(read_flag(flag) - epoch) < 0; ++spins) {
    if (spins % kSpinsPerAbortCheck == 0 && *static_cast<const volatile std::uint32_t*>(aborted)) return;
  }
}

// Where rank `to` receives rank `from`'s values of a call of this parity.
__device__ float* inbox(const PeerGroupView& g, int to, int parity, int from) {
  return g.inboxes[to] + (static_cast<std::size_t>(parity) * g.ranks + from) * kPeerMostValues;
}

__global__ void __launch_bounds__(kThreads) peer_all_reduce_kernel(PeerGroupView g, float* data, std::size_t count) {
  begin_dependent();
  const int block = blockIdx.x;
  __shared__ std::uint32_t epoch;
  if (threadIdx.x == 0) epoch = g.epochs[block] + 1;
  __syncthreads();
  const int parity = epoch & 1;
  const std::size_t first = threadIdx.x * 4;
  // Pushed to every rank (writes to a peer's memory do not wait for it; reads from it would).
  for (std::size_t c = block; c * kChunk < count; c += gridDim.x) {
    const std::size_t i = c * kChunk + first;
    if (i >= count) continue;
    const float4 values = *reinterpret_cast<const float4*>(data + i);
    for (int to = 0; to < g.ranks; ++to) *reinterpret_cast<float4*>(inbox(g, to, parity, g.rank) + i) = values;
  }
  __syncthreads();
  if (threadIdx.x < g.ranks) {
    const int peer = threadIdx.x;
    raise_flag(g.flags[peer] + block * kPeerMostRanks + g.rank, epoch);
    wait_for(g.flags[g.rank] + block * kPeerMostRanks + peer, epoch, g.aborted);
  }
  __syncthreads();
  for (std::size_t c = block; c * kChunk < count; c += gridDim.x) {
    const std::size_t i = c * kChunk + first;
    if (i >= count) continue;
    float4 sum = *reinterpret_cast<const float4*>(inbox(g, g.rank, parity, 0) + i);
    for (int r = 1; r < g.ranks; ++r) sum = add(sum, *reinterpret_cast<const float4*>(inbox(g, g.rank, parity, r) + i));
    *reinterpret_cast<float4*>(data + i) = sum;
  }
  if (threadIdx.x == 0) g.epochs[block] = epoch;
}

}  // namespace

void launch_peer_all_reduce(const PeerGroupView& group, float* data, std::size_t count, const DeviceContext& ctx) {
  require(peer_all_reduce_takes(count), "launch_peer_all_reduce", "a message of whole float4s up to 1 MiB");
  require(group.ranks >= 1 && group.ranks <= kPeerMostRanks, "launch_peer_all_reduce", "1 to 8 ranks");
  require(is_aligned(data, 16), "launch_peer_all_reduce", "data aligned to 16 bytes");
  launch_dependent(peer_all_reduce_kernel, kPeerBlocks, kThreads, 0, ctx, group, data, count);
}

}  // namespace rf::gpu
