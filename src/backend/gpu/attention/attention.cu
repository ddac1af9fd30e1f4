// Attention over the paged f16 KV cache, never materialising the scores. This file holds the plan
// (which kernels serve a batch) and the portable prefill kernel: flash attention, an online softmax over
// tiles of keys, in fp32, written against groups of 16 lanes, which divide every warp width. Prefill on
// CUDA sm_80+ goes to the tensor-core kernel of prefill_mma.cu instead, and decode tokens to
// decode_attention.cu.
#include <algorithm>

#include "backend/gpu/attention/attention.cuh"
#include "backend/gpu/attention/attention.h"
#include "backend/gpu/common/reduce.cuh"

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
constexpr int kRowsPerThread = 4;  // 32 query rows per tile: 8 tokens of a group of 4
constexpr int kRows = kRowsPerThread * kRowGroups;
// Decode ranges: none under a block's first pass over its keys (32 keys at head dim 128; 4 times that
// in a wide block).
constexpr int kMinKeysPerSplit = 32;
constexpr int kMaxSplits = 256;

struct Params {
  const float* q;
  KvCacheLayer cache;
  AttentionBatch batch;
  HeadShape shape;
  float q_scale;  // softmax scale times log2(e)
  QueryTiling tiling;
  float* out;
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

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads) flash_kernel(Params p) {
  // Rows stay 16-byte aligned, and 8 lanes' 16-byte reads of 8 consecutive rows hit distinct banks.
  constexpr int kStride = kHeadDim + 8;
  constexpr int kDimPairs = (kHeadDim + 2 * kKeyLanes - 1) / (2 * kKeyLanes);
  alignas(16) __shared__ float q_tile[kRows][kHeadDim];
  alignas(16) __shared__ std::uint16_t kv_tile[kTileKeys][kStride];  // keys, then values
  alignas(16) __shared__ float p_tile[kTileKeys][kRows];              // softmax weights, key-major
  __shared__ TileTokens<kRows> tile;

  const HeadShape shape = p.shape;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int q_dim = shape.n_heads * kHeadDim, kv_dim = shape.n_kv_heads * kHeadDim;
  const int kv_head = blockIdx.y / p.tiling.head_chunks, chunk = blockIdx.y % p.tiling.head_chunks;
  // Tiles run latest first: they have the most keys, so the last wave is the short one.
  const int first_token = (gridDim.x - 1 - blockIdx.x) * p.tiling.tokens;
  tile.load(p.batch, first_token, p.tiling.tokens);
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

  const float cap = p.batch.softcap * kLog2e;
  do {
    int limit[kRowsPerThread], lower[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      limit[i] = row_limit(queries[i], tile, segment);
      lower[i] = row_first(queries[i], tile);
    }
    const int key_end = segment.last_pos + 1;
    float row_max[kRowsPerThread], row_sum[kRowsPerThread], acc[kRowsPerThread][kDimPairs][2];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      row_max[i] = -INFINITY;
      row_sum[i] = 0.0f;  // this lane's keys only, until the end
#pragma unroll
      for (int c = 0; c < kDimPairs; ++c) acc[i][c][0] = acc[i][c][1] = 0.0f;
    }

    for (int first = segment.first_pos; first < key_end; first += kTileKeys) {
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
          const int key = first + lane + kKeyLanes * j;
          s[i][j] = key > limit[i] || key < lower[i] ? -INFINITY : cap_score(s[i][j], cap);
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
        static_assert(kRowsPerThread % 4 == 0);
#pragma unroll
        for (int i = 0; i < kRowsPerThread; i += 4) {
          const float4 w4 = *reinterpret_cast<const float4*>(&p_tile[key][row0 + i]);
          weight[i] = w4.x, weight[i + 1] = w4.y, weight[i + 2] = w4.z, weight[i + 3] = w4.w;
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
#pragma unroll
      for (int c = 0; c < kDimPairs; ++c) {
        const int dim = 2 * lane + 2 * kKeyLanes * c;
        if (dim < kHeadDim) {
          *reinterpret_cast<float2*>(&p.out[offset + dim]) = make_float2(acc[i][c][0] * inverse, acc[i][c][1] * inverse);
        }
      }
    }
  } while (next_segment(tile, segment));
}

void launch_flash(const Params& p, dim3 grid, const DeviceContext& ctx) {
  with_prefill_head_dim(p.shape.head_dim, [&](auto head_dim) {
    launch_kernel(flash_kernel<decltype(head_dim)::value>, grid, kThreads, 0, ctx.stream(), p);
  });
  RF_GPU_CHECK_LAUNCH();
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

void check_shape(const AttentionBatch& batch, HeadShape shape) {
  require(shape.n_heads > 0 && shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0, "launch_attention",
          "bad head counts");
  require(supported_head_dim(shape.head_dim), "launch_attention", "head_dim must be 16, 32, 64, 80, 96, 128 or 256");
  require(batch.n_tokens >= 0 && batch.block_size > 0 && batch.max_blocks > 0, "launch_attention",
          "bad token count or block table shape");
  require(batch.n_tokens == 0 || batch.max_positions > 0, "launch_attention", "max_positions must be positive");
}

}  // namespace

}  // namespace attention

using namespace attention;

bool tensor_core_attention_available(const DeviceContext& ctx, int head_dim) {
  if (!prefill_kernels_take(head_dim)) return false;
  const auto key = reinterpret_cast<const void*>(&tensor_core_kernel_available);
  return ctx.memo({key, head_dim, 0, 0}, [&] { return tensor_core_kernel_available(head_dim) ? 1 : 0; }) != 0;
}

AttentionPlan plan_attention(const DeviceContext& ctx, const AttentionBatch& batch, HeadShape shape) {
  check_shape(batch, shape);
  // A decode block's time is mostly its chain of dependent steps, which each of its heads lengthens:
  // the fewest heads a block whose blocks still fit one wave (one token of Llama 3 8B: a head a block
  // instead of 4; measured: docs/perf_history.md, v10). Then as many key ranges as that wave holds: a
  // second wave costs about as much again (32 sequences at 128 positions: 2 ranges in 512 blocks against
  // 1 range in 256; measured: docs/perf_history.md, v7).
  const int most = decode_heads_per_block(shape, 0);
  auto blocks = [&](int heads) {
    return static_cast<long long>(batch.n_tokens) * shape.n_kv_heads * decode_head_chunks(shape, heads);
  };
  int heads = 1;
  while (heads < most && blocks(heads) > decode_blocks_per_wave(ctx, shape, heads, false)) heads *= 2;
  // One token's blocks (a head each) leave most SMs idle, and its ranges cost a merge through memory
  // (partials, a fence, an atomic, a second read): where the step's blocks fit a wave of wide ones, a
  // block takes 4 times the keys a pass instead (one token of Llama 3 8B at up to 128 positions: one
  // range of 32 blocks, not 4 ranges of 128). Longer contexts still split, a wide pass a range, which
  // beat ranges of 2 or 4 passes (measured: docs/perf_history.md, v15).
  const long long wide_wave = decode_blocks_per_wave(ctx, shape, 1, true);
  const bool wide = heads == 1 && blocks(1) <= wide_wave;
  const long long wave = wide ? wide_wave : decode_blocks_per_wave(ctx, shape, heads, false);
  const long long for_occupancy = blocks(heads) > 0 ? wave / blocks(heads) : 1;
  const long long min_keys = wide ? kMinKeysPerSplit * kWideDecodeThreads / kDecodeThreads : kMinKeysPerSplit;
  const long long by_length = (static_cast<long long>(batch.most_keys()) + min_keys - 1) / min_keys;
  const int splits = static_cast<int>(std::clamp<long long>(std::min(for_occupancy, by_length), 1, kMaxSplits));
  return {tensor_core_attention_available(ctx, shape.head_dim), splits, false, heads, wide};
}

AttentionPlan plan_batch_invariant_attention(const AttentionBatch& batch, HeadShape shape) {
  check_shape(batch, shape);
  return {false, 1, true};
}

std::size_t attention_workspace_bytes(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape) {
  return decode_workspace_bytes(plan.decode_splits, plan.decode_heads, batch, shape);
}

std::size_t most_attention_workspace_bytes(const DeviceContext& ctx, int max_tokens, int max_blocks, int block_size, HeadShape shape) {
  // Every batch size: ranges per token mostly shrink as tokens grow, but not where the wide blocks of a
  // few tokens give way to narrow ones, whose wave holds 4 times the blocks.
  std::size_t most = 0;
  for (int n = 1; n <= max_tokens; ++n) {
    const AttentionBatch batch{nullptr, nullptr, nullptr, n, max_blocks, block_size, max_blocks * block_size};
    most = std::max(most, attention_workspace_bytes(plan_attention(ctx, batch, shape), batch, shape));
  }
  return most;
}

void clear_attention_workspace(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape, void* workspace,
                               const DeviceContext& ctx) {
  clear_decode_workspace(plan.decode_splits, plan.decode_heads, batch, shape, workspace, ctx);
}

void launch_attention_planned(const AttentionPlan& plan, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                              HeadShape shape, float scale, float* out, void* workspace, const DeviceContext& ctx,
                              const DecodeRope& rope, HalfCopy half, QuantizedActivations rounded) {
  check_shape(batch, shape);
  require(plan.decode_splits >= 1 && plan.decode_splits <= kMaxSplits, "launch_attention", "bad split count");
  require(aligned(q, 16) && aligned(out, 8) && aligned(cache.keys, 16) && aligned(cache.values, 16), "launch_attention",
          "q, out or the cache is misaligned");
  require(!rope.k || (aligned(rope.k, 16) && aligned(rope.v, 16) && rope.slots && rope.inv_freq), "launch_attention",
          "the fused RoPE needs aligned k and v, slots and frequencies");
  require(rope.row_stride == 0 || (rope.k && rope.row_stride % 4 == 0), "launch_attention",
          "a row stride for q, k and v needs the fused RoPE and a multiple of 4");
  require(plan.decode_splits == 1 || workspace != nullptr, "launch_attention", "split partials need a workspace");
  check_half_copy(half, "launch_attention");
  require(!half.data || rope.k || plan.every_token_decodes, "launch_attention",
          "a 16-bit copy of out needs every token to decode");
  require(!rounded.codes || ((rope.k || plan.every_token_decodes) && shape.head_dim % 32 == 0), "launch_attention",
          "an int8 copy of out needs every token to decode, and heads of whole blocks of 32");
  require(!plan.tensor_cores || tensor_core_attention_available(ctx, shape.head_dim), "launch_attention",
          "the tensor-core kernel does not run here");
  if (batch.n_tokens == 0) return;
  const int group = shape.n_heads / shape.n_kv_heads;
  const float q_scale = scale * kLog2e;
  // A single token is a decode token; so is every token with rope, under the batch-invariant plan, or
  // of heads wider than the prefill kernels take.
  const bool every_token_decodes = plan.every_token_decodes || !prefill_kernels_take(shape.head_dim);
  if (batch.n_tokens > 1 && !rope.k && !every_token_decodes) {
    if (plan.tensor_cores) {
      launch_prefill_mma(q, cache, batch, shape, q_scale, out, ctx);
    } else {
      const Params p{q, cache, batch, shape, q_scale, tile_queries(group, kRows), out};
      const dim3 grid((batch.n_tokens + p.tiling.tokens - 1) / p.tiling.tokens, shape.n_kv_heads * p.tiling.head_chunks);
      launch_flash(p, grid, ctx);
    }
  }
  launch_decode(q, cache, batch, shape, q_scale, plan.decode_splits, plan.decode_heads, plan.decode_wide,
                every_token_decodes, rope, workspace, out, half, rounded, ctx);
}

}  // namespace rf::gpu
