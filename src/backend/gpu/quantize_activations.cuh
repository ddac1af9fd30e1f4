#pragma once
// Rounding activations to int8 blocks of 32 (QuantizedActivations, ops.h), as a step any kernel that
// holds its values four to a thread can end with: the RMSNorm before a projection, or a pass of its own.
#include "backend/gpu/ops.h"
#include "backend/gpu/reduce.cuh"

namespace rf::gpu {

// Rounds values 4v .. 4v + 3 of a flattened [tokens, cols] array, held by this thread as `values`:
// vector v's block of 32 is the 8 vectors around it, held by 8 consecutive threads (so v % 8 must be
// threadIdx.x % 8). Every thread of the block calls this together; one without values passes
// has_values = false (its group's threads all do, as cols is a multiple of 32).
template <int kBlockThreads>
__device__ void round_to_int8(float4 values, bool has_values, std::size_t vector, QuantizedActivations out) {
  const float largest = fmaxf(fmaxf(fabsf(values.x), fabsf(values.y)), fmaxf(fabsf(values.z), fabsf(values.w)));
  const float scale = group_reduce<8, kBlockThreads>(largest, MaxOp{}) / 127.0f;
  const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  const int q[4] = {__float2int_rn(values.x * inverse), __float2int_rn(values.y * inverse),
                    __float2int_rn(values.z * inverse), __float2int_rn(values.w * inverse)};
  // Sums of at most 32 codes of |q| <= 127 are exact in fp32.
  const float code_sum = group_reduce<8, kBlockThreads>(static_cast<float>(q[0] + q[1] + q[2] + q[3]), SumOp{});
  if (has_values) {
    const std::uint32_t packed = (q[0] & 0xFFu) | (q[1] & 0xFFu) << 8 | (q[2] & 0xFFu) << 16 | static_cast<std::uint32_t>(q[3]) << 24;
    reinterpret_cast<std::uint32_t*>(out.codes)[vector] = packed;
  }
  if (has_values && vector % 8 == 0) {
    out.scales[vector / 8] = scale;
    out.code_sums[vector / 8] = static_cast<std::int32_t>(code_sum);
  }
}

}  // namespace rf::gpu
