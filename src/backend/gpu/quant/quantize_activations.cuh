#pragma once
// Rounding activations to int8 blocks of 32 (QuantizedActivations, quant/activation_copies.h), as a step
// any kernel that holds the values can end with: the RMSNorm before a projection and a pass of its own
// (four values a thread), the decode attention before o (one).
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/common/reduce.cuh"

namespace rf::gpu {

// Rounds values [first, first + kValues) of a flattened [tokens, cols] array, held by this thread: their
// block of 32 is held by the 32 / kValues consecutive threads around it (so first / kValues % (32 /
// kValues) must be threadIdx.x % (32 / kValues)). Every thread of the block calls this together; one
// without values passes has_values = false (its group's threads all do, as cols is a multiple of 32).
// Every kernel that rounds activations goes through here, so that all give the same bits.
template <int kBlockThreads, int kValues>
__device__ void round_to_int8(const float (&values)[kValues], bool has_values, std::size_t first, QuantizedActivations out) {
  static_assert(32 % kValues == 0);
  constexpr int kGroup = 32 / kValues;
  float largest = 0.0f;
#pragma unroll
  for (int i = 0; i < kValues; ++i) largest = fmaxf(largest, fabsf(values[i]));
  const float scale = group_reduce<kGroup, kBlockThreads>(largest, MaxOp{}) / 127.0f;
  const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  int q[kValues], sum = 0;
#pragma unroll
  for (int i = 0; i < kValues; ++i) q[i] = __float2int_rn(values[i] * inverse), sum += q[i];
  // Sums of at most 32 codes of |q| <= 127 are exact in fp32.
  const float code_sum = group_reduce<kGroup, kBlockThreads>(static_cast<float>(sum), SumOp{});
  if (!has_values) return;
  if constexpr (kValues == 4) {
    const std::uint32_t packed = (q[0] & 0xFFu) | (q[1] & 0xFFu) << 8 | (q[2] & 0xFFu) << 16 | static_cast<std::uint32_t>(q[3]) << 24;
    reinterpret_cast<std::uint32_t*>(out.codes)[first / 4] = packed;
  } else {
#pragma unroll
    for (int i = 0; i < kValues; ++i) out.codes[first + i] = static_cast<std::int8_t>(q[i]);
  }
  if (first % 32 == 0) {
    out.scales[first / 32] = scale;
    out.code_sums[first / 32] = static_cast<std::int32_t>(code_sum);
  }
}

// The same for values 4v .. 4v + 3, held as one float4.
template <int kBlockThreads>
__device__ void round_to_int8(float4 values, bool has_values, std::size_t vector, QuantizedActivations out) {
  const float held[4] = {values.x, values.y, values.z, values.w};
  round_to_int8<kBlockThreads, 4>(held, has_values, 4 * vector, out);
}

}  // namespace rf::gpu
