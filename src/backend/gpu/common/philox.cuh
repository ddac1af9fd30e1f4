#pragma once
// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11): a
// counter-based generator, so that every thread draws the n-th number of a stream directly.
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu {

struct Philox4x32 {
  unsigned v[4];
};

__device__ inline Philox4x32 philox4x32_10(Philox4x32 counter, unsigned key0, unsigned key1) {
  constexpr unsigned kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // the round multipliers
  constexpr unsigned kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // the key schedule's increments
  unsigned* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    const unsigned hi0 = __umulhi(kMul0, c[0]), lo0 = kMul0 * c[0];
    const unsigned hi1 = __umulhi(kMul1, c[2]), lo1 = kMul1 * c[2];
    const Philox4x32 next{{hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0}};
    counter = next;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// A uniform draw in (0, 1) from 24 random bits: element `index` of draw `draw` of the stream `seed`.
__device__ inline float philox_uniform(unsigned long long seed, unsigned long long draw, unsigned index) {
  const Philox4x32 counter{{index, static_cast<unsigned>(draw), static_cast<unsigned>(draw >> 32), 0u}};
  const unsigned bits = philox4x32_10(counter, static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32)).v[0];
  return (static_cast<float>(bits >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

}  // namespace rf::gpu
