#pragma once
// The shapes attention and its neighbours share: the heads of a layer, and one layer of the paged KV
// cache on the GPU.
#include <cstdint>

namespace rf::gpu {

struct HeadShape {
  int n_heads;     // query heads
  int n_kv_heads;  // key/value heads (n_heads a multiple of it)
  int head_dim;
};

// One layer of the paged KV cache on the GPU: f16 rows of kv_dim values, the row of cache slot s
// (= block * block_size + offset, see backend/cpu/kv_cache.h) at s * kv_dim. f16 halves the bytes
// decode attention reads; keys and values stay far inside its range (|x| < 65504), and its 11-bit
// significand keeps them within 2^-11 relative of fp32.
struct KvCacheLayer {
  std::uint16_t* keys;
  std::uint16_t* values;
};

}  // namespace rf::gpu
