#pragma once
// Sums and maxima over groups of consecutive threads, written against RF_WARP_SIZE: within a warp
// by xor shuffles, across the warps of a wider group through shared memory. Every thread of a
// group gets the group's result. Groups wider than a warp synchronise the whole block, so every
// thread of the block must reach the call.
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces v over each aligned group of kGroup threads of a block of kBlockThreads (both powers of
// two, the block one-dimensional).
template <int kGroup, int kBlockThreads, class Op>
__device__ float group_reduce(float v, Op op) {
  static_assert((kGroup & (kGroup - 1)) == 0 && kBlockThreads % kGroup == 0);
  constexpr int kLanes = kGroup < RF_WARP_SIZE ? kGroup : RF_WARP_SIZE;
  for (int mask = kLanes / 2; mask > 0; mask /= 2) v = op(v, shuffle_xor(v, mask));
  if constexpr (kGroup > RF_WARP_SIZE) {
    constexpr int kWarpsPerGroup = kGroup / RF_WARP_SIZE;
    __shared__ float partial[kBlockThreads / RF_WARP_SIZE];
    const int warp = static_cast<int>(threadIdx.x) / RF_WARP_SIZE;
    if (threadIdx.x % RF_WARP_SIZE == 0) partial[warp] = v;
    __syncthreads();
    const int first = warp / kWarpsPerGroup * kWarpsPerGroup;
    v = partial[first];
    for (int w = 1; w < kWarpsPerGroup; ++w) v = op(v, partial[first + w]);
    __syncthreads();  // the partials may be overwritten by the caller's next reduction
  }
  return v;
}

template <int kBlockThreads>
__device__ float block_sum(float v) { return group_reduce<kBlockThreads, kBlockThreads>(v, SumOp{}); }

template <int kBlockThreads>
__device__ float block_max(float v) { return group_reduce<kBlockThreads, kBlockThreads>(v, MaxOp{}); }

}  // namespace rf::gpu
