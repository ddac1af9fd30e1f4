// Decode attention: each token alone in its sequence (a decode step) against its cached keys and
// values, split across the sequence (flash-decoding) so that even one token at a short context spreads
// over many blocks; at 128 positions a step is a few dependent loads, not a walk over tiles.
//
// A block takes one token, up to kMaxHeads query heads of one KV head's group (GQA: they share every
// key and value it loads) and one range of keys. Within it, groups of lanes take keys in turn, each lane
// 8 dims of a row (one 16-byte load of f16), and keep an online softmax over their own keys; the block
// merges its groups through shared memory. Wide blocks (kWideDecodeThreads, one head) have 4 times the
// groups: where a step has few blocks, one range of them covers what several ranges would, without the
// merge through memory that ranges need. With several ranges, each block writes its partial output
// (normalised by its own sum) and the log of that sum; the block that finishes its token's ranges last
// merges them, in range order, so that the result does not depend on which block that is.
//
// With a DecodeRope, the kernel also does launch_rope_kv_append's work for its tokens: it rotates q as
// it loads it, and the block whose range holds the token's own position rotates the new key, appends
// it and the value to the cache, and reads them from shared memory rather than back from the cache.
#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <tuple>

#include "backend/gpu/attention/attention.cuh"
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/quant/quantize_activations.cuh"
#include "backend/gpu/rope/rope.cuh"

namespace rf::gpu::attention {

namespace {

constexpr int kMaxHeads = 8;

// Lanes that read one key row together (8 dims each), and the key groups of a block.
template <int kHeadDim, int kThreads>
struct DecodeLanes {
  static constexpr int kPerKey = static_cast<int>(std::bit_ceil(static_cast<unsigned>(kHeadDim / 8)));
  static constexpr int kGroups = kThreads / kPerKey;
  static_assert(kPerKey <= 32, "a key's lanes must sit within one warp (32 or 64 lanes)");
};

struct DecodeParams {
  const float* q;
  KvCacheLayer cache;
  AttentionBatch batch;
  HeadShape shape;
  float q_scale;       // softmax scale times log2(e)
  int head_chunks;     // blocks across one group's query heads
  int keys_per_split;  // keys of each range; gridDim.z ranges
  bool every_token;    // false: tokens not alone in their sequence are the prefill kernel's
  DecodeRope rope;     // rope.k null: q and the cache are already rotated and appended
  float* out;
  HalfCopy half;                 // out's 16-bit copy, where asked for
  QuantizedActivations rounded;  // out rounded to int8, where asked for
  float* partial_out;  // [range][token][q_dim], each normalised by its own sum (several ranges only)
  float* partial_lse;  // [range][token][head]: log2 of that sum, in base-2 score units (-inf: no keys)
  unsigned* arrivals;  // [token][blockIdx.y]: ranges done; the last block resets it to 0
};

__device__ __forceinline__ void load_8(const float* p, float (&out)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  const float values[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = values[i];
}

__device__ __forceinline__ uint4 pack_halves(const float (&v)[8]) {
  std::uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) words[i] = float_to_half_bits(v[2 * i]) | static_cast<std::uint32_t>(float_to_half_bits(v[2 * i + 1])) << 16;
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// RoPE for the 8 dims [dim, dim + 8) of a head at `position`, as launch_rope_kv_append applies it: the
// angles' cos and sin, and a row's values rotated. Split halves pair dim i with i + head_dim / 2 (a
// lane's 8 dims all sit in one half), interleaved layouts pair 2i with 2i + 1 (within the lane).
template <int kHeadDim>
struct LaneRope {
  float c[8], s[8];
  bool split_halves;
  int dim;

  LaneRope() = default;
  __device__ LaneRope(const DecodeRope& rope, int position, int lane_dim)
      : split_halves(rope.layout == RopeLayout::SplitHalves), dim(lane_dim) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int pair = split_halves ? (dim + i) % (kHeadDim / 2) : (dim + i) / 2;
      rope_angle(position, rope.inv_freq[pair], c[i], s[i]);
    }
  }

  __device__ void rotate(const float* head, float (&out)[8]) const {
    float own[8];
    load_8(head + dim, own);
    if (split_halves) {
      constexpr int kHalf = kHeadDim / 2;
      const bool first_half = dim < kHalf;
      float partner[8];
      load_8(head + (first_half ? dim + kHalf : dim - kHalf), partner);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        out[i] = first_half ? rotate_pair(own[i], partner[i], c[i], s[i]).x : rotate_pair(partner[i], own[i], c[i], s[i]).y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; i += 2) {
        const float2 r = rotate_pair(own[i], own[i + 1], c[i], s[i]);
        out[i] = r.x, out[i + 1] = r.y;
      }
    }
  }
};

// out[at] = o, and its 16-bit copy and int8 rounding where asked for. The rounding reduces over each
// block of 32 values (which a head holds whole), held by 32 consecutive threads that call this together;
// as round_to_int8 asks, every thread of the block calls this, those past the outputs with has_value
// false (whole groups of 32 of them).
template <int kThreads>
__device__ __forceinline__ void write_out(const DecodeParams& p, std::size_t at, float o, bool has_value) {
  if (has_value) {
    p.out[at] = o;
    if (p.half.data) p.half.data[at] = float_to_16bit(o, p.half.type == DType::BF16);
  }
  if (p.rounded.codes) {
    const float value[1] = {has_value ? o : 0.0f};
    round_to_int8<kThreads, 1>(value, has_value, at, p.rounded);
  }
}

// Counts this block's range of its token as done: true in the block that finishes the token's ranges
// last (for these heads), which then merges them.
__device__ bool arrived_last(const DecodeParams& p, int t) {
  __shared__ bool last;
  __threadfence();  // this block's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* arrived = p.arrivals + static_cast<std::size_t>(t) * gridDim.y + blockIdx.y;
    last = atomicAdd(arrived, 1u) + 1 == gridDim.z;
    if (last) *arrived = 0;  // ready for the next launch
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

template <int kHeadDim, int kHeads, int kThreads>
__device__ __forceinline__ void decode_block(const DecodeParams& p) {
  using Lanes = DecodeLanes<kHeadDim, kThreads>;
  constexpr int kKeys = kHeads >= 8 ? 2 : 4;  // keys in flight per lane, within its registers
  constexpr int kStep = Lanes::kGroups * kKeys;
  const AttentionBatch& batch = p.batch;
  const int t = blockIdx.x;
  const bool alone = alone_in_sequence(batch.seq, batch.n_tokens, t);
  if (!p.every_token && !alone) return;  // the prefill kernel's token
  const int group = p.shape.n_heads / p.shape.n_kv_heads;
  const int kv_head = blockIdx.y / p.head_chunks, first_in_group = blockIdx.y % p.head_chunks * kHeads;
  const int heads = min(kHeads, group - first_in_group);
  const int head0 = kv_head * group + first_in_group;
  const int q_dim = p.shape.n_heads * kHeadDim, kv_dim = p.shape.n_kv_heads * kHeadDim;
  const int q_stride = p.rope.row_stride > 0 ? p.rope.row_stride : q_dim;
  const int kv_stride = p.rope.row_stride > 0 ? p.rope.row_stride : kv_dim;
  const int lane = threadIdx.x % Lanes::kPerKey, key_group = threadIdx.x / Lanes::kPerKey;
  const int dim = 8 * lane;
  const bool reads = dim < kHeadDim;  // head dims 80 and 96 leave lanes of a group idle
  const int seq = batch.seq[t], position = batch.positions[t];
  const float cap = batch.softcap * kLog2e;
  const int begin = first_visible(position, batch.window) + blockIdx.z * p.keys_per_split;
  const int end = min(position + 1, begin + p.keys_per_split);

  // Key i's row of this lane's dims, when it exists (rows past the end are zeros).
  auto load_key = [&](int i, uint4& k, uint4& v) {
    k = v = make_uint4(0, 0, 0, 0);
    if (i < end && reads) {
      const std::size_t at = cache_row(batch, seq, i, kv_dim) + kv_head * kHeadDim + dim;
      k = *reinterpret_cast<const uint4*>(p.cache.keys + at);
      v = *reinterpret_cast<const uint4*>(p.cache.values + at);
    }
  };
  // The first pass's keys load before the wait for the kernel before, overlapping its tail: a token
  // alone in its sequence finds every position but its own in the cache since earlier steps. (What it
  // reads here was written before the kernel two launches back completed, which it has once this
  // kernel runs: dependent_launch.cuh. Its own position is this step's, loaded after.) The held keys
  // take registers, which cost a block per SM: one token gains, batch 32's 512 blocks lose a little
  // (measured: docs/perf_history.md, v4).
  uint4 first_k[kKeys], first_v[kKeys];
#pragma unroll
  for (int j = 0; j < kKeys; ++j) {
    const int i = begin + key_group * kKeys + j;
    load_key(alone && i != position ? i : end, first_k[j], first_v[j]);
  }
  // RoPE's angles come from the position and the inverse frequencies alone: their sines and cosines
  // are computed before the wait too.
  const bool fused_rope = p.rope.k != nullptr;
  const LaneRope<kHeadDim> rope = fused_rope && reads ? LaneRope<kHeadDim>(p.rope, position, dim) : LaneRope<kHeadDim>();
  begin_dependent();

  float q[kHeads][8];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    float values[8] = {};
    if (h < heads && reads) {
      const float* head = p.q + static_cast<std::size_t>(t) * q_stride + (head0 + h) * kHeadDim;
      if (fused_rope) {
        rope.rotate(head, values);
      } else {
        load_8(head + dim, values);
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) q[h][i] = values[i] * p.q_scale;
  }
  // This range holds the new position: its key and value go to the cache (each block of the KV head
  // that reads them writes the same bits) and, as the same f16 bits, to shared memory, where the lanes
  // that take that position read them instead of waiting on the cache.
  const bool own_here = fused_rope && begin <= position && position < end;
  __shared__ uint4 own_k[kHeadDim / 8], own_v[kHeadDim / 8];
  if (own_here) {
    if (key_group == 0 && reads) {
      const std::size_t from = static_cast<std::size_t>(t) * kv_stride + kv_head * kHeadDim;
      const std::size_t to = static_cast<std::size_t>(p.rope.slots[t]) * kv_dim + kv_head * kHeadDim + dim;
      float k[8], v[8];
      rope.rotate(p.rope.k + from, k);
      load_8(p.rope.v + from + dim, v);
      own_k[lane] = pack_halves(k);
      own_v[lane] = pack_halves(v);
      *reinterpret_cast<uint4*>(p.cache.keys + to) = own_k[lane];
      *reinterpret_cast<uint4*>(p.cache.values + to) = own_v[lane];
    }
    __syncthreads();
  }

  float row_max[kHeads], row_sum[kHeads], acc[kHeads][8];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    row_max[h] = -INFINITY;
    row_sum[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[h][i] = 0.0f;
  }

  // The trip count is the block's, so that every lane of a warp reaches the shuffles.
  for (int base = begin; base < end; base += kStep) {
    const int first = base + key_group * kKeys;
    uint4 k_raw[kKeys], v_raw[kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      if (own_here && first + j == position) {
        k_raw[j] = reads ? own_k[lane] : make_uint4(0, 0, 0, 0);
        v_raw[j] = reads ? own_v[lane] : make_uint4(0, 0, 0, 0);
      } else if (base == begin && alone && first + j != position) {
        k_raw[j] = first_k[j], v_raw[j] = first_v[j];
      } else {
        load_key(first + j, k_raw[j], v_raw[j]);
      }
    }
    float s[kHeads][kKeys];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      float k[8];
      unpack_halves(k_raw[j], k);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        s[h][j] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s[h][j] += q[h][i] * k[i];
#pragma unroll
        for (int mask = Lanes::kPerKey / 2; mask > 0; mask /= 2) s[h][j] += shuffle_xor(s[h][j], mask);
        s[h][j] = cap_score(s[h][j], cap);
      }
    }
    float v[kKeys][8];
#pragma unroll
    for (int j = 0; j < kKeys; ++j) unpack_halves(v_raw[j], v[j]);
    // Online softmax: rescale what was summed under the old maximum.
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        if (first + j < end) tile_max = fmaxf(tile_max, s[h][j]);
      }
      const float new_max = fmaxf(row_max[h], tile_max);
      const float reference = new_max == -INFINITY ? 0.0f : new_max;  // a group with no key yet stays all zero
      const float alpha = exp2f(row_max[h] - reference);
      row_max[h] = new_max;
      row_sum[h] *= alpha;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[h][i] *= alpha;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        const float weight = first + j < end ? exp2f(s[h][j] - reference) : 0.0f;
        row_sum[h] += weight;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[h][i] += weight * v[j][i];
      }
    }
  }

  // Merge the key groups.
  __shared__ float group_max[Lanes::kGroups][kHeads], group_sum[Lanes::kGroups][kHeads];
  alignas(16) __shared__ float group_acc[Lanes::kGroups][kHeads][kHeadDim];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    if (lane == 0) group_max[key_group][h] = row_max[h], group_sum[key_group][h] = row_sum[h];
    if (reads) {
      auto* to = reinterpret_cast<float4*>(&group_acc[key_group][h][dim]);
      to[0] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      to[1] = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
  }
  __syncthreads();
  const bool split = gridDim.z > 1;
  const std::size_t token_offset = static_cast<std::size_t>(t) * q_dim + head0 * kHeadDim;
  const std::size_t range_stride = static_cast<std::size_t>(batch.n_tokens) * q_dim;
  // The outputs' loops run the block's trip count: write_out's rounding is called by every thread.
  const int outputs = heads * kHeadDim;
  for (int first_output = 0; first_output < outputs; first_output += kThreads) {
    const int e = first_output + static_cast<int>(threadIdx.x);
    if (e >= outputs) {
      if (!split) write_out<kThreads>(p, 0, 0.0f, false);
      continue;
    }
    const int h = e / kHeadDim, d = e % kHeadDim;
    float largest = -INFINITY;
    for (int g = 0; g < Lanes::kGroups; ++g) largest = fmaxf(largest, group_max[g][h]);
    const float reference = largest == -INFINITY ? 0.0f : largest;
    float total = 0.0f, value = 0.0f;
    for (int g = 0; g < Lanes::kGroups; ++g) {
      const float weight = exp2f(group_max[g][h] - reference);
      total += weight * group_sum[g][h];
      value += weight * group_acc[g][h][d];
    }
    const float o = total > 0.0f ? value / total : 0.0f;
    if (!split) {
      write_out<kThreads>(p, token_offset + e, o, true);
      continue;
    }
    p.partial_out[blockIdx.z * range_stride + token_offset + e] = o;
    if (d == 0) {
      const std::size_t at = (static_cast<std::size_t>(blockIdx.z) * batch.n_tokens + t) * p.shape.n_heads + head0 + h;
      p.partial_lse[at] = total > 0.0f ? largest + log2f(total) : -INFINITY;
    }
  }
  if (!split || !arrived_last(p, t)) return;

  // The last block: out = each range's output weighted by its share of the softmax sum. Other blocks
  // wrote the partials, so they are read past this SM's L1.
  const volatile float* partial_out = p.partial_out;
  const volatile float* partial_lse = p.partial_lse;
  const std::size_t lse_stride = static_cast<std::size_t>(batch.n_tokens) * p.shape.n_heads;
  for (int first_output = 0; first_output < outputs; first_output += kThreads) {
    const int e = first_output + static_cast<int>(threadIdx.x);
    if (e >= outputs) {
      write_out<kThreads>(p, 0, 0.0f, false);
      continue;
    }
    const volatile float* lse = partial_lse + static_cast<std::size_t>(t) * p.shape.n_heads + head0 + e / kHeadDim;
    float largest = -INFINITY;
    for (unsigned r = 0; r < gridDim.z; ++r) largest = fmaxf(largest, lse[r * lse_stride]);  // range 0 holds the first key seen
    float total = 0.0f, value = 0.0f;
    for (unsigned r = 0; r < gridDim.z; ++r) {
      const float weight = exp2f(lse[r * lse_stride] - largest);
      total += weight;
      value += weight * partial_out[r * range_stride + token_offset + e];
    }
    write_out<kThreads>(p, token_offset + e, value / total, true);
  }
}

template <int kHeadDim, int kHeads>
__global__ void __launch_bounds__(kDecodeThreads) decode_kernel(const DecodeParams p) {
  decode_block<kHeadDim, kHeads, kDecodeThreads>(p);
}

// A wide block held its SM's registers whole at 125 a thread, so that the GEMV after it (o) found no room
// for its early blocks there; at 96, without spills, it leaves room for 4 of them (measured on one token
// of Llama 3 8B: docs/perf_history.md, v15).
template <int kHeadDim>
__global__ void RF_LAUNCH_BOUNDS_CAPPED(kWideDecodeThreads, 96) wide_decode_kernel(const DecodeParams p) {
  decode_block<kHeadDim, 1, kWideDecodeThreads>(p);
}

int decode_threads(bool wide) { return wide ? kWideDecodeThreads : kDecodeThreads; }

// The workspace: arrival counters first (their own 256 bytes and more, so partials stay aligned), then
// the partial outputs and sums.
std::size_t arrival_bytes(int splits, int heads, const AttentionBatch& batch, HeadShape shape) {
  if (splits <= 1) return 0;
  constexpr std::size_t kAlign = 256;
  const std::size_t bytes =
      static_cast<std::size_t>(batch.n_tokens) * shape.n_kv_heads * decode_head_chunks(shape, heads) * sizeof(unsigned);
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// The kernel for blocks of `heads` heads, wide or not.
template <int kDim>
auto decode_kernel_for(HeadShape shape, int heads, bool wide) -> void (*)(DecodeParams) {
  const int per_block = decode_heads_per_block(shape, heads);
  if (wide) {
    require(per_block == 1, "launch_attention", "wide decode blocks take one head");
    return wide_decode_kernel<kDim>;
  }
  switch (per_block) {
    case 1: return decode_kernel<kDim, 1>;
    case 2: return decode_kernel<kDim, 2>;
    case 4: return decode_kernel<kDim, 4>;
    default: return decode_kernel<kDim, kMaxHeads>;
  }
}

}  // namespace

int decode_heads_per_block(HeadShape shape, int heads) {
  const int most = std::min(kMaxHeads, static_cast<int>(std::bit_ceil(static_cast<unsigned>(shape.n_heads / shape.n_kv_heads))));
  return heads > 0 ? std::min(most, static_cast<int>(std::bit_ceil(static_cast<unsigned>(heads)))) : most;
}

int decode_head_chunks(HeadShape shape, int heads) {
  const int group = shape.n_heads / shape.n_kv_heads, per_block = decode_heads_per_block(shape, heads);
  return (group + per_block - 1) / per_block;
}

std::size_t decode_workspace_bytes(int splits, int heads, const AttentionBatch& batch, HeadShape shape) {
  if (splits <= 1) return 0;
  const std::size_t per_split = static_cast<std::size_t>(batch.n_tokens) * shape.n_heads * (shape.head_dim + 1);
  return arrival_bytes(splits, heads, batch, shape) + splits * per_split * sizeof(float);
}

void clear_decode_workspace(int splits, int heads, const AttentionBatch& batch, HeadShape shape, void* workspace,
                            const DeviceContext& ctx) {
  const std::size_t bytes = arrival_bytes(splits, heads, batch, shape);
  if (bytes > 0) RF_GPU_CHECK(gpuMemsetAsync(workspace, 0, bytes, ctx.stream()));
}

int decode_blocks_per_wave(const DeviceContext& ctx, HeadShape shape, int heads, bool wide) {
  // Asked once per device and kernel: the plan is made every step.
  const void* kernel = nullptr;
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    kernel = reinterpret_cast<const void*>(decode_kernel_for<decltype(head_dim)::value>(shape, heads, wide));
  });
  return ctx.memo({kernel, decode_threads(wide), 0, 0}, [&] {
    int per_multiprocessor = 0;
    RF_GPU_CHECK(gpuOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, decode_threads(wide), 0));
    return std::max(1, per_multiprocessor * ctx.attributes().multiprocessors);
  });
}

void launch_decode(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float q_scale,
                   int splits, int heads, bool wide, bool every_token, const DecodeRope& rope, void* workspace,
                   float* out, HalfCopy half, QuantizedActivations rounded, const DeviceContext& ctx) {
  const int chunks = decode_head_chunks(shape, heads);
  const int keys_per_split = (batch.most_keys() + splits - 1) / splits;
  DecodeParams p{q, cache, batch, shape, q_scale, chunks, keys_per_split, every_token,
                 rope, out, half, rounded, nullptr, nullptr, nullptr};
  if (splits > 1) {
    p.arrivals = static_cast<unsigned*>(workspace);
    p.partial_out = reinterpret_cast<float*>(static_cast<std::uint8_t*>(workspace) + arrival_bytes(splits, heads, batch, shape));
    p.partial_lse = p.partial_out + static_cast<std::size_t>(splits) * batch.n_tokens * shape.n_heads * shape.head_dim;
  }
  const dim3 grid(batch.n_tokens, shape.n_kv_heads * chunks, splits);
  with_head_dim(shape.head_dim, [&](auto head_dim) {
    launch_dependent(decode_kernel_for<decltype(head_dim)::value>(shape, heads, wide), grid, decode_threads(wide), 0,
                     ctx, p);
  });
}

}  // namespace rf::gpu::attention
