// Flash attention for prefill on NVIDIA's tensor cores (mma.sync m16n8k16, sm_80+), beside the portable
// kernel of attention.cu and for the same tiles: Q K^T and P V as f16 products with fp32 accumulation
// and an fp32 online softmax. q (scaled) and the softmax weights are rounded to f16 for the products:
// 2^-11 relative each, the f16 cache's own rounding. Keys and values stream through shared memory by
// cp.async, the next tile's keys loading while this tile's values are used.
#include <climits>

#include "backend/gpu/attention/attention.cuh"
#include "backend/gpu/attention/flash_mma.cuh"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu::attention {

namespace {

// Four warps of 16 query rows (an mma's M) each.
constexpr int kWarps = 4;
constexpr int kWarpRows = 16;
constexpr int kRows = kWarps * kWarpRows;

}  // namespace

QueryTiling tensor_core_tiling(int group) { return tile_queries(group, kRows); }

#if defined(ROCMFORGE_GPU_CUDA)

namespace {

constexpr int kLanes = 32;  // mma.sync and ldmatrix are instructions of a 32-lane warp
constexpr int kThreads = kWarps * kLanes;
using flash::kTileKeys;

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    prefill_mma_kernel(const float* q, KvCacheLayer cache, AttentionBatch batch, HeadShape shape, float q_scale,
                       QueryTiling tiling, float* out) {
#if __CUDA_ARCH__ >= 800
  constexpr int kStride = kHeadDim + 8;  // halves: 16-byte rows; ldmatrix's 8 rows hit distinct banks
  constexpr int kSteps = kHeadDim / 16;  // k-steps of Q K^T; 16-dim column pairs of P V
  constexpr int kChunks = kHeadDim / 8;  // 16-byte pieces of a row
  static_assert(kRows == kTileKeys, "Q is staged through the key tile");
  alignas(16) __shared__ std::uint16_t k_tile[kTileKeys][kStride];
  alignas(16) __shared__ std::uint16_t v_tile[kTileKeys][kStride];
  __shared__ TileTokens<kRows> tile;

  const int group = shape.n_heads / shape.n_kv_heads;
  const int q_dim = shape.n_heads * kHeadDim, kv_dim = shape.n_kv_heads * kHeadDim;
  const int kv_head = blockIdx.y / tiling.head_chunks, chunk = blockIdx.y % tiling.head_chunks;
  const int first_token = (gridDim.x - 1 - blockIdx.x) * tiling.tokens;  // latest (longest) tiles first
  tile.load(batch, first_token, tiling.tokens);
  Segment segment;
  if (!next_segment(tile, segment)) return;

  // Q, scaled and rounded to f16, through k_tile into each warp's A fragments.
  for (int e = threadIdx.x; e < kRows * kHeadDim / 4; e += kThreads) {
    const int r = e / (kHeadDim / 4), d = e % (kHeadDim / 4) * 4;
    const RowQuery query = row_query(r, tiling, group, kv_head, chunk);
    const int t = first_token + query.token_index;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (query.head >= 0 && t < batch.n_tokens) {
      v = *reinterpret_cast<const float4*>(q + static_cast<std::size_t>(t) * q_dim + query.head * kHeadDim + d);
    }
    flash::store_scaled_halves(&k_tile[r][d], v, q_scale);
  }
  __syncthreads();
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const flash::LaneMatrix lm(lane);
  unsigned q_frag[kSteps][4];
  flash::query_fragments(q_frag, k_tile, warp * kWarpRows, lm);
  __syncthreads();  // k_tile takes keys from here on

  const RowQuery rows[2] = {row_query(warp * kWarpRows + lane / 4, tiling, group, kv_head, chunk),
                            row_query(warp * kWarpRows + lane / 4 + 8, tiling, group, kv_head, chunk)};
  const float cap = batch.softcap * kLog2e;
  do {
    const int limit[2] = {row_limit(rows[0], tile, segment), row_limit(rows[1], tile, segment)};
    const int lower[2] = {row_first(rows[0], tile), row_first(rows[1], tile)};
    // Key tiles past every row of a warp (above the causal diagonal) or before every row's window are
    // loaded for the block but skipped. (The bounds go through the shuffles as floats.)
    float warp_limit = static_cast<float>(max(limit[0], limit[1]));
    float warp_lower = static_cast<float>(min(limit[0] < 0 ? INT_MAX : lower[0], limit[1] < 0 ? INT_MAX : lower[1]));
    for (int mask = kLanes / 2; mask > 0; mask /= 2) {
      warp_limit = fmaxf(warp_limit, shuffle_xor(warp_limit, mask));
      warp_lower = fminf(warp_lower, shuffle_xor(warp_lower, mask));
    }
    const int key_begin = segment.first_pos, key_end = segment.last_pos + 1;
    const int n_tiles = (key_end - key_begin + kTileKeys - 1) / kTileKeys;
    auto load_tile = [&](const std::uint16_t* rows_of, std::uint16_t(*dst)[kStride], int first) {
      for (int c = threadIdx.x; c < kTileKeys * kChunks; c += kThreads) {
        const int key = c / kChunks, part = c % kChunks, pos = first + key;
        const bool valid = pos < key_end;
        const std::uint16_t* src =
            valid ? rows_of + cache_row(batch, segment.seq, pos, kv_dim) + kv_head * kHeadDim + part * 8 : rows_of;
        copy_async(&dst[key][part * 8], src, valid);
      }
      commit_copies();
    };

    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
    float o[kHeadDim / 8][4] = {};
    load_tile(cache.keys, k_tile, key_begin);
    load_tile(cache.values, v_tile, key_begin);
    for (int j = 0; j < n_tiles; ++j) {
      const int first = key_begin + j * kTileKeys;
      const bool active = warp_limit >= static_cast<float>(first) && warp_lower < static_cast<float>(first + kTileKeys);
      wait_copies<1>();  // keys of tile j (its values may still be in flight)
      __syncthreads();
      float s[flash::kScoreTiles][4];
      if (active) flash::tile_scores(s, q_frag, k_tile, lm);
      __syncthreads();  // every warp is done with k_tile
      if (j + 1 < n_tiles) {
        load_tile(cache.keys, k_tile, first + kTileKeys);
        wait_copies<1>();  // values of tile j
      } else {
        wait_copies<0>();
      }

      unsigned p_frag[kTileKeys / 16][4];
      if (active) {
#pragma unroll
        for (int nt = 0; nt < flash::kScoreTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = first + flash::tile_key(lane, nt, e % 2);
            s[nt][e] = key > limit[e / 2] || key < lower[e / 2] ? -INFINITY : cap_score(s[nt][e], cap);
          }
        }
        flash::online_softmax(s, o, row_max, row_sum);
        flash::weight_fragments(p_frag, s);
      }
      __syncthreads();  // every thread's copies of v_tile have landed
      if (active) flash::accumulate_values(o, p_frag, v_tile, lm);
      __syncthreads();  // every warp is done with v_tile
      if (j + 1 < n_tiles) load_tile(cache.values, v_tile, first + kTileKeys);
    }

    flash::finish_sums(row_sum);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (limit[half] < 0) continue;
      const int t = first_token + rows[half].token_index;
      float* dst = out + static_cast<std::size_t>(t) * q_dim + rows[half].head * kHeadDim;
      const float inverse = 1.0f / row_sum[half];  // a row always sees its own position
#pragma unroll
      for (int nd = 0; nd < kHeadDim / 8; ++nd) {
        *reinterpret_cast<float2*>(&dst[nd * 8 + lane % 4 * 2]) =
            make_float2(o[nd][2 * half] * inverse, o[nd][2 * half + 1] * inverse);
      }
    }
  } while (next_segment(tile, segment));
#else
  __trap();  // never launched: tensor_core_kernel_available() checks the code's architecture first
#endif
}

}  // namespace

bool tensor_core_kernel_available(int head_dim) {
  bool built = false;
  with_prefill_head_dim(head_dim, [&](auto dim) { built = built_for_tensor_cores(prefill_mma_kernel<decltype(dim)::value>); });
  return built;
}

void launch_prefill_mma(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float q_scale,
                        float* out, const DeviceContext& ctx) {
  const QueryTiling tiling = tensor_core_tiling(shape.n_heads / shape.n_kv_heads);
  const dim3 grid((batch.n_tokens + tiling.tokens - 1) / tiling.tokens, shape.n_kv_heads * tiling.head_chunks);
  with_prefill_head_dim(shape.head_dim, [&](auto dim) {
    launch_kernel(prefill_mma_kernel<decltype(dim)::value>, grid, kThreads, 0, ctx.stream(), q, cache, batch, shape, q_scale, tiling, out);
  });
  RF_GPU_CHECK_LAUNCH();
}

#else  // HIP: no tensor-core path yet (the portable kernel serves)

bool tensor_core_kernel_available(int) { return false; }

void launch_prefill_mma(const float*, KvCacheLayer, const AttentionBatch&, HeadShape, float, float*, const DeviceContext&) {
  throw_bad_launch("launch_attention", "no tensor-core attention kernel in this build");
}

#endif

}  // namespace rf::gpu::attention
