#pragma once
// RoPE's arithmetic, shared by launch_rope_kv_append and the decode attention kernel that fuses it, so
// that a token's rotated q and k come out the same bits whichever kernel rotates them.
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

// cos and sin of the angle of frequency inv_freq at `position`.
__device__ __forceinline__ void rope_angle(int position, float inv_freq, float& c, float& s) {
  sincosf(static_cast<float>(position) * inv_freq, &s, &c);
}

// The pair (a, b) rotated by the angle whose cos and sin are c and s.
__device__ __forceinline__ float2 rotate_pair(float a, float b, float c, float s) {
  return make_float2(fmaf(a, c, -b * s), fmaf(b, c, a * s));
}

}  // namespace rf::gpu
