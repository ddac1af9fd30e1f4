// RoPE on q and k, fused with appending k and v to the paged KV cache.
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/rope/rope.h"
#include "backend/gpu/rope/rope.cuh"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;

// One block per token. The angles of a position are shared by every head: computed once into
// shared memory (cos in the first head_dim / 2 floats, sin in the next).
__global__ void __launch_bounds__(kThreads)
    rope_kv_append_kernel(float* q, const float* k, const float* v, const std::int32_t* positions,
                          const std::int32_t* slots, HeadShape shape, const float* inv_freq, bool split_halves,
                          KvCacheLayer cache) {
  begin_dependent();
  RF_DYNAMIC_SHARED(float, trig);
  const int t = blockIdx.x;
  const int half = shape.head_dim / 2;
  const int position = positions[t];
  for (int i = threadIdx.x; i < half; i += kThreads) rope_angle(position, inv_freq[i], trig[i], trig[half + i]);
  __syncthreads();

  // The pair of dimension i: split halves rotate (i, i + d/2), interleaved (2i, 2i + 1), as rf::cpu::rope.
  const int stride = split_halves ? 1 : 2;
  const int partner = split_halves ? half : 1;
  const int q_dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
  float* q_row = q + static_cast<std::size_t>(t) * q_dim;
  const float* k_row = k + static_cast<std::size_t>(t) * kv_dim;
  const std::size_t slot_offset = static_cast<std::size_t>(slots[t]) * kv_dim;
  const int q_pairs = shape.n_heads * half;
  const int pairs = q_pairs + shape.n_kv_heads * half;
  for (int p = threadIdx.x; p < pairs; p += kThreads) {
    const bool is_q = p < q_pairs;
    const int pair = is_q ? p : p - q_pairs;
    const int i = pair % half;
    const int a = pair / half * shape.head_dim + i * stride;
    const int b = a + partner;
    const float c = trig[i], s = trig[half + i];
    const float* row = is_q ? q_row : k_row;
    const float2 r = rotate_pair(row[a], row[b], c, s);
    if (is_q) {
      q_row[a] = r.x;
      q_row[b] = r.y;
    } else {
      cache.keys[slot_offset + a] = float_to_half_bits(r.x);
      cache.keys[slot_offset + b] = float_to_half_bits(r.y);
    }
  }
  const float* v_row = v + static_cast<std::size_t>(t) * kv_dim;
  for (int j = threadIdx.x; j < kv_dim; j += kThreads) cache.values[slot_offset + j] = float_to_half_bits(v_row[j]);
}

}  // namespace

void launch_rope_kv_append(float* q, const float* k, const float* v, const std::int32_t* positions,
                           const std::int32_t* slots, int n_tokens, HeadShape shape, const float* inv_freq,
                           RopeLayout layout, KvCacheLayer cache, const DeviceContext& ctx) {
  require(n_tokens >= 0 && shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0,
          "launch_rope_kv_append", "bad head counts or negative token count");
  require(shape.head_dim > 0 && shape.head_dim % 2 == 0, "launch_rope_kv_append", "head_dim must be even");
  if (n_tokens == 0) return;
  const std::size_t trig_bytes = static_cast<std::size_t>(shape.head_dim) * sizeof(float);
  launch_dependent(rope_kv_append_kernel, n_tokens, kThreads, trig_bytes, ctx, q, k, v, positions, slots, shape,
                   inv_freq, layout == RopeLayout::SplitHalves, cache);
}

}  // namespace rf::gpu
