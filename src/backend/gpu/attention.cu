// Attention over the paged f16 KV cache, never materialising the scores: flash attention (an online
// softmax over tiles of keys) for prefill tiles, and the same kernel per decode token with its keys cut
// into ranges whose partial results a combine kernel merges (flash-decoding). The portable version:
// fp32 arithmetic, written against groups of 16 lanes, which divide every warp width. Prefill on CUDA
// sm_80+ goes to the tensor-core kernel of attention_mma.cu instead.
#include <algorithm>
#include <climits>

#include "backend/gpu/attention.cuh"
#include "backend/gpu/attention_kernels.h"
#include "backend/gpu/reduce.cuh"

namespace rf::gpu {

namespace attention {

namespace {

// A row's scores are spread over kKeyLanes lanes, kKeysPerLane keys each; the same lanes hold its
// output dims in pairs (2 * lane + 32 * i).
constexpr int kKeyLanes = 16;
constexpr int kKeysPerLane = 4;
constexpr int kTileKeys = kKeyLanes * kKeysPerLane;
constexpr int kRowGroups = 8;
constexpr int kThreads = kKeyLanes * kRowGroups;
constexpr int kPrefillRowsPerThread = 4;  // 32 query rows per tile: 8 tokens of a group of 4
constexpr int kDecodeRowsPerThread = 1;   // 8 rows: one token's heads of a group
// Decode splits: enough blocks to fill a large GPU several times over, but no split under two tiles
// (at 128 positions on an H100, one split of two tiles took 18.5 us per layer, two splits of one
// tile and their combine 32.8).
constexpr int kTargetBlocks = 1024;
constexpr int kMinKeysPerSplit = 2 * kTileKeys;
constexpr int kMaxSplits = 256;

struct Params {
  const float* q;
  KvCacheLayer cache;
  AttentionBatch batch;
  HeadShape shape;
  float q_scale;  // softmax scale times log2(e)
  QueryTiling tiling;
  int keys_per_split;
  float* out;          // where partial_out is null
  float* partial_out;  // [split][token][q_dim], each split normalised by its own sum
  float* partial_lse;  // [split][token][head]: log2 of that sum, in the scores' base-2 units (-inf: no keys)
};

// Key or value rows of positions [first, first + kTileKeys) of sequence `seq` into `tile`, zeros from
// position `end` on (those slots may hold anything, NaN included).
template <int kHeadDim, int kStride>
__device__ void load_rows(const std::uint16_t* cache, const AttentionBatch& batch, int seq, int first, int end,
                          int kv_dim, int kv_head, std::uint16_t (*tile)[kStride]) {
  constexpr int kChunks = kHeadDim / 8;  // 16-byte pieces of a row
  for (int c = threadIdx.x; c < kTileKeys * kChunks; c += kThreads) {
    const int key = c / kChunks, part = c % kChunks, pos = first + key;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (pos < end) {
      v = *reinterpret_cast<const uint4*>(cache + cache_row(batch, seq, pos, kv_dim) + kv_head * kHeadDim + part * 8);
    }
    *reinterpret_cast<uint4*>(&tile[key][part * 8]) = v;
  }
}

__device__ __forceinline__ void unpack_halves(uint4 raw, float (&out)[8]) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = half_bits_to_float(static_cast<unsigned short>(words[i / 2] >> (16 * (i % 2))));
}

template <int kHeadDim, int kRowsPerThread, bool kDecode>
__global__ void __launch_bounds__(kThreads) flash_kernel(Params p) {
  constexpr int kRows = kRowsPerThread * kRowGroups;
  // Rows stay 16-byte aligned, and 8 lanes' 16-byte reads of 8 consecutive rows hit distinct banks.
  constexpr int kStride = kHeadDim + 8;
  constexpr int kDimPairs = (kHeadDim + 2 * kKeyLanes - 1) / (2 * kKeyLanes);
  alignas(16) __shared__ float q_tile[kRows][kHeadDim];
  alignas(16) __shared__ std::uint16_t kv_tile[kTileKeys][kStride];  // keys, then values
  alignas(16) __shared__ float p_tile[kTileKeys][kRows];              // softmax weights, key-major
  __shared__ TileTokens<kDecode ? 1 : kRows> tile;

  const HeadShape shape = p.shape;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int q_dim = shape.n_heads * kHeadDim, kv_dim = shape.n_kv_heads * kHeadDim;
  const int kv_head = blockIdx.y / p.tiling.head_chunks, chunk = blockIdx.y % p.tiling.head_chunks;
  // Prefill tiles run latest first: they have the most keys, so the last wave is the short one.
  const int first_token = (kDecode ? blockIdx.x : gridDim.x - 1 - blockIdx.x) * p.tiling.tokens;
  tile.load(p.batch, first_token, p.tiling.tokens, kDecode);
  Segment segment;
  if (!next_segment(tile, segment)) return;

  for (int e = threadIdx.x; e < kRows * kHeadDim; e += kThreads) {
    const int r = e / kHeadDim, d = e % kHeadDim;
    const RowQuery query = row_query(r, p.tiling, group, kv_head, chunk);
    const int t = first_token + query.token_index;
    const bool used = query.head >= 0 && t < p.batch.n_tokens;
    q_tile[r][d] = used ? p.q[static_cast<std::size_t>(t) * q_dim + query.head * kHeadDim + d] * p.q_scale : 0.0f;
  }

  const int lane = threadIdx.x % kKeyLanes, row0 = threadIdx.x / kKeyLanes * kRowsPerThread;
  RowQuery queries[kRowsPerThread];
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) queries[i] = row_query(row0 + i, p.tiling, group, kv_head, chunk);

  do {
    int limit[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) limit[i] = row_limit(queries[i], tile, segment);
    const int key_begin = blockIdx.z * p.keys_per_split;
    const int key_end = min(segment.last_pos + 1, key_begin + p.keys_per_split);
    float row_max[kRowsPerThread], row_sum[kRowsPerThread], acc[kRowsPerThread][kDimPairs][2];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      row_max[i] = -INFINITY;
      row_sum[i] = 0.0f;  // this lane's keys only, until the end
#pragma unroll
      for (int c = 0; c < kDimPairs; ++c) acc[i][c][0] = acc[i][c][1] = 0.0f;
    }

    for (int first = key_begin; first < key_end; first += kTileKeys) {
      __syncthreads();  // the tiles are free (and, the first time, q_tile is written)
      load_rows<kHeadDim, kStride>(p.cache.keys, p.batch, segment.seq, first, key_end, kv_dim, kv_head, kv_tile);
      __syncthreads();

      float s[kRowsPerThread][kKeysPerLane] = {};
      for (int d = 0; d < kHeadDim; d += 8) {
        float k[kKeysPerLane][8];
#pragma unroll
        for (int j = 0; j < kKeysPerLane; ++j) {
          unpack_halves(*reinterpret_cast<const uint4*>(&kv_tile[lane + kKeyLanes * j][d]), k[j]);
        }
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          const float4 qa = *reinterpret_cast<const float4*>(&q_tile[row0 + i][d]);
          const float4 qb = *reinterpret_cast<const float4*>(&q_tile[row0 + i][d + 4]);
          const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
          for (int j = 0; j < kKeysPerLane; ++j) {
#pragma unroll
            for (int x = 0; x < 8; ++x) s[i][j] += qv[x] * k[j][x];
          }
        }
      }

      // Online softmax: rescale what was summed under the old maximum.
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeysPerLane; ++j) {
          if (first + lane + kKeyLanes * j > limit[i]) s[i][j] = -INFINITY;
          tile_max = fmaxf(tile_max, s[i][j]);
        }
        const float new_max = fmaxf(row_max[i], group_reduce<kKeyLanes, kThreads>(tile_max, MaxOp{}));
        const float reference = new_max == -INFINITY ? 0.0f : new_max;  // a row with no key yet stays all zero
        const float alpha = exp2f(row_max[i] - reference);
        row_max[i] = new_max;
        row_sum[i] *= alpha;
#pragma unroll
        for (int j = 0; j < kKeysPerLane; ++j) {
          const float weight = exp2f(s[i][j] - reference);
          p_tile[lane + kKeyLanes * j][row0 + i] = weight;
          row_sum[i] += weight;
        }
#pragma unroll
        for (int c = 0; c < kDimPairs; ++c) {
          acc[i][c][0] *= alpha;
          acc[i][c][1] *= alpha;
        }
      }
      __syncthreads();  // the keys are no longer read; the weights are complete
      load_rows<kHeadDim, kStride>(p.cache.values, p.batch, segment.seq, first, key_end, kv_dim, kv_head, kv_tile);
      __syncthreads();

      for (int key = 0; key < kTileKeys; ++key) {
        float weight[kRowsPerThread];
        if constexpr (kRowsPerThread % 4 == 0) {
#pragma unroll
          for (int i = 0; i < kRowsPerThread; i += 4) {
            const float4 w4 = *reinterpret_cast<const float4*>(&p_tile[key][row0 + i]);
            weight[i] = w4.x, weight[i + 1] = w4.y, weight[i + 2] = w4.z, weight[i + 3] = w4.w;
          }
        } else {
#pragma unroll
          for (int i = 0; i < kRowsPerThread; ++i) weight[i] = p_tile[key][row0 + i];
        }
#pragma unroll
        for (int c = 0; c < kDimPairs; ++c) {
          const int dim = 2 * lane + 2 * kKeyLanes * c;
          if (kHeadDim % (2 * kKeyLanes) != 0 && dim >= kHeadDim) continue;
          const std::uint32_t pair = *reinterpret_cast<const std::uint32_t*>(&kv_tile[key][dim]);
          const float v0 = half_bits_to_float(static_cast<unsigned short>(pair));
          const float v1 = half_bits_to_float(static_cast<unsigned short>(pair >> 16));
#pragma unroll
          for (int i = 0; i < kRowsPerThread; ++i) {
            acc[i][c][0] += weight[i] * v0;
            acc[i][c][1] += weight[i] * v1;
          }
        }
      }
    }

#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const float total = group_reduce<kKeyLanes, kThreads>(row_sum[i], SumOp{});
      if (limit[i] < 0) continue;
      const int t = first_token + queries[i].token_index;
      const std::size_t offset = static_cast<std::size_t>(t) * q_dim + queries[i].head * kHeadDim;
      const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
      float* dst = p.partial_out ? p.partial_out + static_cast<std::size_t>(blockIdx.z) * p.batch.n_tokens * q_dim + offset
                                 : p.out + offset;
#pragma unroll
      for (int c = 0; c < kDimPairs; ++c) {
        const int dim = 2 * lane + 2 * kKeyLanes * c;
        if (dim < kHeadDim) *reinterpret_cast<float2*>(&dst[dim]) = make_float2(acc[i][c][0] * inverse, acc[i][c][1] * inverse);
      }
      if (p.partial_out && lane == 0) {
        const std::size_t at = (static_cast<std::size_t>(blockIdx.z) * p.batch.n_tokens + t) * shape.n_heads + queries[i].head;
        p.partial_lse[at] = total > 0.0f ? row_max[i] + log2f(total) : -INFINITY;
      }
    }
  } while (next_segment(tile, segment));
}

// out = the splits' partial outputs weighted by their share of the softmax sum, for decode tokens.
__global__ void __launch_bounds__(kThreads)
    combine_kernel(const float* partial_out, const float* partial_lse, int splits, AttentionBatch batch, HeadShape shape,
                   float* out) {
  const int t = blockIdx.x;
  if (!alone_in_sequence(batch.seq, batch.n_tokens, t)) return;
  const int q_dim = shape.n_heads * shape.head_dim;
  const std::size_t out_stride = static_cast<std::size_t>(batch.n_tokens) * q_dim;
  const std::size_t lse_stride = static_cast<std::size_t>(batch.n_tokens) * shape.n_heads;
  for (int i = threadIdx.x; i < q_dim; i += kThreads) {
    const float* lse = partial_lse + static_cast<std::size_t>(t) * shape.n_heads + i / shape.head_dim;
    float largest = -INFINITY;
    for (int s = 0; s < splits; ++s) largest = fmaxf(largest, lse[s * lse_stride]);  // finite: split 0 holds position 0
    float total = 0.0f, value = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float weight = exp2f(lse[s * lse_stride] - largest);
      total += weight;
      value += weight * partial_out[s * out_stride + static_cast<std::size_t>(t) * q_dim + i];
    }
    out[static_cast<std::size_t>(t) * q_dim + i] = value / total;
  }
}

template <int kRowsPerThread, bool kDecode>
void launch_flash(const Params& p, dim3 grid, gpuStream_t stream) {
  with_head_dim(p.shape.head_dim, [&](auto head_dim) {
    flash_kernel<decltype(head_dim)::value, kRowsPerThread, kDecode><<<grid, kThreads, 0, stream>>>(p);
  });
  RF_GPU_CHECK_LAUNCH();
}

QueryTiling decode_tiling(HeadShape shape) {
  return tile_queries(shape.n_heads / shape.n_kv_heads, kDecodeRowsPerThread * kRowGroups, true);
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

void check_shape(const AttentionBatch& batch, HeadShape shape) {
  require(shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0, "launch_attention",
          "bad head counts");
  require(supported_head_dim(shape.head_dim), "launch_attention", "head_dim must be 16, 32, 64, 80, 96 or 128");
  require(batch.n_tokens >= 0 && batch.block_size > 0 && batch.max_blocks > 0, "launch_attention",
          "bad token count or block table shape");
  require(batch.n_tokens == 0 || batch.max_positions > 0, "launch_attention", "max_positions must be positive");
}

}  // namespace

}  // namespace attention

using namespace attention;

bool tensor_core_attention_available(int head_dim) {
  return supported_head_dim(head_dim) && tensor_core_kernel_available(head_dim);
}

AttentionPlan plan_attention(const AttentionBatch& batch, HeadShape shape) {
  check_shape(batch, shape);
  const long long blocks = static_cast<long long>(batch.n_tokens) * shape.n_kv_heads * decode_tiling(shape).head_chunks;
  const long long for_occupancy = blocks > 0 ? (kTargetBlocks + blocks - 1) / blocks : 1;
  const long long by_length = (static_cast<long long>(batch.max_positions) + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  const int splits = static_cast<int>(std::clamp<long long>(std::min(for_occupancy, by_length), 1, kMaxSplits));
  return {tensor_core_attention_available(shape.head_dim), splits};
}

std::size_t attention_workspace_bytes(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape) {
  if (plan.decode_splits <= 1) return 0;
  const std::size_t per_split = static_cast<std::size_t>(batch.n_tokens) * shape.n_heads * (shape.head_dim + 1);
  return plan.decode_splits * per_split * sizeof(float);
}

void launch_attention_planned(const AttentionPlan& plan, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                              HeadShape shape, float scale, float* out, void* workspace, gpuStream_t stream) {
  check_shape(batch, shape);
  require(plan.decode_splits >= 1 && plan.decode_splits <= kMaxSplits, "launch_attention", "bad split count");
  require(aligned(q, 16) && aligned(out, 8) && aligned(cache.keys, 16) && aligned(cache.values, 16), "launch_attention",
          "q, out or the cache is misaligned");
  require(plan.decode_splits == 1 || workspace != nullptr, "launch_attention", "split partials need a workspace");
  require(!plan.tensor_cores || tensor_core_attention_available(shape.head_dim), "launch_attention",
          "the tensor-core kernel does not run here");
  if (batch.n_tokens == 0) return;
  const int group = shape.n_heads / shape.n_kv_heads;
  Params p{q, cache, batch, shape, scale * kLog2e, {}, INT_MAX / 2, out, nullptr, nullptr};

  if (batch.n_tokens > 1) {  // a single token is a decode token
    if (plan.tensor_cores) {
      launch_prefill_mma(q, cache, batch, shape, p.q_scale, out, stream);
    } else {
      p.tiling = tile_queries(group, kPrefillRowsPerThread * kRowGroups, false);
      const dim3 grid((batch.n_tokens + p.tiling.tokens - 1) / p.tiling.tokens, shape.n_kv_heads * p.tiling.head_chunks);
      launch_flash<kPrefillRowsPerThread, false>(p, grid, stream);
    }
  }

  p.tiling = decode_tiling(shape);
  const int splits = plan.decode_splits;
  if (splits > 1) {
    const int keys = (batch.max_positions + splits - 1) / splits;
    p.keys_per_split = (keys + kTileKeys - 1) / kTileKeys * kTileKeys;
    p.partial_out = static_cast<float*>(workspace);
    p.partial_lse = p.partial_out + static_cast<std::size_t>(splits) * batch.n_tokens * shape.n_heads * shape.head_dim;
  }
  launch_flash<kDecodeRowsPerThread, true>(p, dim3(batch.n_tokens, shape.n_kv_heads * p.tiling.head_chunks, splits),
                                           stream);
  if (splits > 1) {
    combine_kernel<<<batch.n_tokens, kThreads, 0, stream>>>(p.partial_out, p.partial_lse, splits, batch, shape, out);
    RF_GPU_CHECK_LAUNCH();
  }
}

}  // namespace rf::gpu
