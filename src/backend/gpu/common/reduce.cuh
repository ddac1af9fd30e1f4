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

// Adds each warp's kValues per lane into warp 0's, pairwise in a fixed tree (warp w adds warp w +
// half's, for halves kWarps / 2, ..., 1), so that the sums never depend on timing: the warps' partial
// sums of a split product (the decode batches' tensor-core GEMMs). `partial` is shared memory of
// kWarps / 2 * kValues * kLanes floats; every thread of the block must call this.
template <int kWarps, int kLanes, int kValues>
__device__ void sum_warps_in_tree(float* values, float* partial) {
  const int lane = static_cast<int>(threadIdx.x) % kLanes, warp = static_cast<int>(threadIdx.x) / kLanes;
#pragma unroll
  for (int half = kWarps / 2; half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int v = 0; v < kValues; ++v) partial[((warp - half) * kValues + v) * kLanes + lane] = values[v];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int v = 0; v < kValues; ++v) values[v] += partial[(warp * kValues + v) * kLanes + lane];
    }
    __syncthreads();
  }
}

}  // namespace rf::gpu
