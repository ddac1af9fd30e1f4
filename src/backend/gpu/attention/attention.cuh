#pragma once
// What the attention kernels share: which queries a block owns, which kernel serves which token, how a
// block walks the sequences its tokens belong to, and where a position's key and value rows sit.
//
// A block owns a tile of query rows: `tokens` consecutive tokens times `heads` query heads of one KV
// head's group (GQA: the heads of a group read the same keys and values, so each key tile loaded serves
// every row). Its tokens usually belong to one sequence; where they do not, the block takes each run of
// same-sequence tokens (a segment) in turn, masking the other rows.
#include <cstdint>
#include <type_traits>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/common/constant_dispatch.h"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/runtime/vendor.h"

namespace rf::gpu::attention {

// log2(e): scores are kept in base 2 (q pre-scaled by it), so that softmax weights are exp2 of differences.
inline constexpr float kLog2e = 1.4426950408889634f;

// The first key position a token at `position` sees through a sliding window (0: none).
__host__ __device__ inline int first_visible(int position, int window) {
  return window > 0 && position >= window ? position - window + 1 : 0;
}

// A score through Gemma 2's soft cap, cap * tanh(score / cap), which keeps its form in base-2 units:
// `cap` is the batch's softcap times log2(e) (0: none).
__device__ __forceinline__ float cap_score(float score, float cap) { return cap > 0.0f ? cap * tanhf(score / cap) : score; }

struct QueryTiling {
  int heads;        // query heads of a group per block: min(group, rows of the kernel's tile)
  int head_chunks;  // blocks across one token's group: ceil(group / heads)
  int tokens;       // tokens per block
};

// A prefill kernel of kRows rows per tile.
inline QueryTiling tile_queries(int group, int rows) {
  const int heads = group < rows ? group : rows;
  return {heads, (group + heads - 1) / heads, rows / heads};
}

// Which kernel serves a token: the decode kernel takes the tokens alone in their sequence in this batch
// (decode steps); the prefill kernel takes the rest (chunks of prompts). The split is for speed only:
// either kernel computes any token right.
__device__ inline bool alone_in_sequence(const std::int32_t* seq, int n_tokens, int t) {
  const int s = seq[t];
  return (t == 0 || seq[t - 1] != s) && (t + 1 == n_tokens || seq[t + 1] != s);
}

// Offset (in elements) of the cache row of position `pos` of sequence `seq`.
__device__ inline std::size_t cache_row(const AttentionBatch& batch, int seq, int pos, int kv_dim) {
  const int block = batch.block_tables[static_cast<std::size_t>(seq) * batch.max_blocks + pos / batch.block_size];
  return (static_cast<std::size_t>(block) * batch.block_size + pos % batch.block_size) * kv_dim;
}

// The tokens of a prefill block's tile, in shared memory; `served` marks those it computes (not those
// alone in their sequence: the decode kernel's).
template <int kMaxTokens>
struct TileTokens {
  std::int32_t seq[kMaxTokens];
  std::int32_t pos[kMaxTokens];
  bool served[kMaxTokens];
  int count;
  int window;

  // Every thread of the block calls this; the tile is readable after the barrier.
  __device__ void load(const AttentionBatch& batch, int first_token, int tokens) {
    if (threadIdx.x == 0) count = tokens, window = batch.window;
    for (int i = threadIdx.x; i < tokens; i += blockDim.x) {
      const int t = first_token + i;
      const bool exists = t < batch.n_tokens;
      served[i] = exists && !alone_in_sequence(batch.seq, batch.n_tokens, t);
      seq[i] = exists ? batch.seq[t] : 0;
      pos[i] = exists ? batch.positions[t] : 0;
    }
    __syncthreads();
  }
};

// Tokens [begin, end) of a tile: served, consecutive, of sequence `seq`; they attend to positions
// first_pos..last_pos of it at most.
struct Segment {
  int begin = 0, end = 0, seq = 0, first_pos = 0, last_pos = 0;
};

// The segment after `s` (start with a default Segment); false when there is none.
template <int kMaxTokens>
__device__ bool next_segment(const TileTokens<kMaxTokens>& tile, Segment& s) {
  int begin = s.end;
  while (begin < tile.count && !tile.served[begin]) ++begin;
  if (begin == tile.count) return false;
  int first_pos = tile.pos[begin];
  s = {begin, begin + 1, tile.seq[begin], 0, tile.pos[begin]};
  while (s.end < tile.count && tile.served[s.end] && tile.seq[s.end] == s.seq) {
    s.last_pos = max(s.last_pos, tile.pos[s.end]);
    first_pos = min(first_pos, tile.pos[s.end]);
    ++s.end;
  }
  s.first_pos = first_visible(first_pos, tile.window);
  return true;
}

// Query row `row` of a block: its token's index in the tile and its head (or -1 where the row is spare).
struct RowQuery {
  int token_index;
  int head;
};

__device__ inline RowQuery row_query(int row, const QueryTiling& tiling, int group, int kv_head, int chunk) {
  const int token_index = row / tiling.heads;
  const int in_group = chunk * tiling.heads + row % tiling.heads;
  const bool used = token_index < tiling.tokens && in_group < group;
  return {token_index, used ? kv_head * group + in_group : -1};
}

// The last key position row `row` may see within segment `s` (causal), or -1 where it is not in it.
template <int kMaxTokens>
__device__ int row_limit(const RowQuery& query, const TileTokens<kMaxTokens>& tile, const Segment& s) {
  const bool inside = query.head >= 0 && query.token_index >= s.begin && query.token_index < s.end;
  return inside ? tile.pos[query.token_index] : -1;
}

// The first key position row `row` may see (its window's start); meaningful where row_limit is not -1.
template <int kMaxTokens>
__device__ int row_first(const RowQuery& query, const TileTokens<kMaxTokens>& tile) {
  return query.head >= 0 ? first_visible(tile.pos[query.token_index], tile.window) : 0;
}

// Eight f16 values (one 16-byte load of a cache row) as floats.
__device__ __forceinline__ void unpack_halves(uint4 raw, float (&out)[8]) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = half_bits_to_float(static_cast<unsigned short>(words[i / 2] >> (16 * (i % 2))));
}

// Calls f(std::integral_constant<int, head_dim>{}): for the decode kernel, every supported head dim;
// for the prefill kernels, those they take.
template <class F>
void with_head_dim(int head_dim, F&& f) {
  if (with_constant<16, 32, 64, 80, 96, 128, 256>(head_dim, f)) return;
  throw_bad_launch("launch_attention", "head_dim must be 16, 32, 64, 80, 96, 128 or 256");
}
template <class F>
void with_prefill_head_dim(int head_dim, F&& f) {
  if (with_constant<16, 32, 64, 80, 96, 128>(head_dim, f)) return;
  throw_bad_launch("launch_attention", "the prefill kernels take head dims 16, 32, 64, 80, 96 and 128");
}

// The decode kernel (decode_attention.cu), for the tokens alone in their sequence: `splits` key ranges
// per token, merged in the kernel, and `heads` query heads of a KV head's group a block (a power of two;
// 0 or more than the kernel takes: its most, the group up to 8), in blocks of kDecodeThreads threads, or
// kWideDecodeThreads where `wide` (one head a block). The heads a block takes, its blocks per token and KV
// head, and the scratch the ranges need (none for one range): their partials, and arrival counters that
// clear_decode_workspace zeroes (see clear_attention_workspace).
constexpr int kDecodeThreads = 128;
constexpr int kWideDecodeThreads = 512;
int decode_heads_per_block(HeadShape shape, int heads);
int decode_head_chunks(HeadShape shape, int heads);
// Decode blocks of this shape that the current device runs at once (one wave).
int decode_blocks_per_wave(const DeviceContext& ctx, HeadShape shape, int heads, bool wide);
std::size_t decode_workspace_bytes(int splits, int heads, const AttentionBatch& batch, HeadShape shape);
void clear_decode_workspace(int splits, int heads, const AttentionBatch& batch, HeadShape shape, void* workspace,
                            const DeviceContext& ctx);
void launch_decode(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float q_scale,
                   int splits, int heads, bool wide, bool every_token, const DecodeRope& rope, void* workspace,
                   float* out, HalfCopy half, QuantizedActivations rounded, const DeviceContext& ctx);

// The tensor-core prefill kernel (prefill_mma.cu), for tokens [0, n_tokens) in tiles of
// tensor_core_tiling(group).tokens. False where this build or device cannot run it.
bool tensor_core_kernel_available(int head_dim);
QueryTiling tensor_core_tiling(int group);
void launch_prefill_mma(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float q_scale,
                        float* out, const DeviceContext& ctx);

}  // namespace rf::gpu::attention
