// Stable Diffusion's attention on NVIDIA's tensor cores (image_attention.h): mma.sync m16n8k16, sm_80+,
// beside the portable kernel of image_attention.cu. The tiles are prefill_mma.cu's: four warps of 16
// queries, 64 keys a tile, Q K^T and P V as f16 products with fp32 accumulation and an fp32 online
// softmax in base 2. Keys and values come as f16 copies, streamed by cp.async (the next tile's keys
// load while this tile's values are used); q, scaled, is rounded as it is read. Head widths that are
// not a multiple of 16 (SD 1.x's 40) are padded with zero columns to the mma's k of 16.
#include "backend/gpu/attention/flash_mma.cuh"
#include "backend/gpu/attention/image_attention.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

#if defined(ROCMFORGE_GPU_CUDA)

namespace {

constexpr float kLog2e = 1.4426950408889634f;  // scores in base 2: q pre-scaled by it
constexpr int kLanes = 32;  // mma.sync and ldmatrix are instructions of a 32-lane warp
constexpr int kWarps = 4;
constexpr int kWarpRows = 16;
constexpr int kRows = kWarps * kWarpRows;
constexpr int kThreads = kWarps * kLanes;
using flash::kTileKeys;
static_assert(kRows == kTileKeys, "Q is staged through the key tile");

template <int kDim>
__global__ void __launch_bounds__(kThreads)
    image_attention_mma_kernel(const float* q, const std::uint16_t* k, const std::uint16_t* v, ImageAttentionShape s,
                               float q_scale, float* y) {
#if __CUDA_ARCH__ >= 800
  constexpr int kPadded = (kDim + 15) / 16 * 16;
  constexpr int kStride = kPadded + 8;  // halves: 16-byte rows; ldmatrix's 8 rows hit distinct banks
  constexpr int kSteps = kPadded / 16;  // k-steps of Q K^T; 16-wide column pairs of P V
  constexpr int kChunks = kDim / 8;     // 16-byte pieces of a row
  static_assert(kDim % 8 == 0, "rows are copied in 16-byte pieces");
  alignas(16) __shared__ std::uint16_t k_tile[kTileKeys][kStride];
  alignas(16) __shared__ std::uint16_t v_tile[kTileKeys][kStride];

  const int image = blockIdx.y / s.heads, head = blockIdx.y % s.heads, first_query = blockIdx.x * kRows;
  const std::size_t row = static_cast<std::size_t>(s.heads) * kDim;  // from one token's values to the next's
  const std::size_t q_at = static_cast<std::size_t>(image) * s.queries * row + head * kDim;
  const std::size_t kv_at = static_cast<std::size_t>(image) * s.keys * row + head * kDim;

  if constexpr (kPadded > kDim) {  // the padding columns stay zero: copies write only the first kDim
    for (int e = threadIdx.x; e < kTileKeys * (kPadded - kDim); e += kThreads) {
      const int r = e / (kPadded - kDim), c = kDim + e % (kPadded - kDim);
      k_tile[r][c] = 0;
      v_tile[r][c] = 0;
    }
  }
  // Q, scaled and rounded to f16, through k_tile into each warp's A fragments.
  for (int e = threadIdx.x; e < kRows * kDim / 4; e += kThreads) {
    const int r = e / (kDim / 4), d = e % (kDim / 4) * 4, t = first_query + r;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (t < s.queries) x = *reinterpret_cast<const float4*>(q + q_at + t * row + d);
    flash::store_scaled_halves(&k_tile[r][d], x, q_scale);
  }
  __syncthreads();
  const int warp = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const flash::LaneMatrix lm(lane);
  unsigned q_frag[kSteps][4];
  flash::query_fragments(q_frag, k_tile, warp * kWarpRows, lm);
  __syncthreads();  // k_tile takes keys from here on

  auto load_tile = [&](const std::uint16_t* rows_of, std::uint16_t(*dst)[kStride], int first) {
    for (int c = threadIdx.x; c < kTileKeys * kChunks; c += kThreads) {
      const int key = c / kChunks, part = c % kChunks, pos = first + key;
      const bool valid = pos < s.keys;
      copy_async(&dst[key][part * 8], valid ? rows_of + kv_at + pos * row + part * 8 : rows_of, valid);
    }
    commit_copies();
  };
  const int n_tiles = (s.keys + kTileKeys - 1) / kTileKeys;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  float o[kPadded / 8][4] = {};
  load_tile(k, k_tile, 0);
  load_tile(v, v_tile, 0);
  for (int j = 0; j < n_tiles; ++j) {
    const int first = j * kTileKeys;
    wait_copies<1>();  // keys of tile j (its values may still be in flight)
    __syncthreads();
    float sc[flash::kScoreTiles][4];
    flash::tile_scores(sc, q_frag, k_tile, lm);
    __syncthreads();  // every warp is done with k_tile
    if (j + 1 < n_tiles) {
      load_tile(k, k_tile, first + kTileKeys);
      wait_copies<1>();  // values of tile j
    } else {
      wait_copies<0>();
    }
    if (first + kTileKeys > s.keys) {  // the last tile, partly past the keys
#pragma unroll
      for (int nt = 0; nt < flash::kScoreTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (first + flash::tile_key(lane, nt, e % 2) >= s.keys) sc[nt][e] = -INFINITY;
        }
      }
    }
    unsigned p_frag[kTileKeys / 16][4];
    flash::online_softmax(sc, o, row_max, row_sum);
    flash::weight_fragments(p_frag, sc);
    __syncthreads();  // every thread's copies of v_tile have landed
    flash::accumulate_values(o, p_frag, v_tile, lm);
    __syncthreads();  // every warp is done with v_tile
    if (j + 1 < n_tiles) load_tile(v, v_tile, first + kTileKeys);
  }

  flash::finish_sums(row_sum);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int t = first_query + warp * kWarpRows + lane / 4 + half * 8;
    if (t >= s.queries) continue;
    float* dst = y + q_at + t * row;
    const float inverse = 1.0f / row_sum[half];
#pragma unroll
    for (int nd = 0; nd < kDim / 8; ++nd) {
      *reinterpret_cast<float2*>(&dst[nd * 8 + lane % 4 * 2]) =
          make_float2(o[nd][2 * half] * inverse, o[nd][2 * half + 1] * inverse);
    }
  }
#else
  __trap();  // never launched: image_attention_mma_available checks the code's architecture first
#endif
}

}  // namespace

bool image_attention_mma_available(const DeviceContext& ctx, int head_dim) {
  const auto key = reinterpret_cast<const void*>(&launch_image_attention_mma);
  return ctx.memo({key, head_dim, 0, 0}, [&] {
    bool built = false;
    with_image_head_dim(head_dim, [&](auto dim) {
      built = built_for_tensor_cores(image_attention_mma_kernel<decltype(dim)::value>);
    });
    return built ? 1 : 0;
  }) != 0;
}

void launch_image_attention_mma(const float* q, const std::uint16_t* k_half, const std::uint16_t* v_half,
                                const ImageAttentionShape& shape, float scale, float* y, const DeviceContext& ctx) {
  check_image_attention(shape, "launch_image_attention_mma");
  require(!shape.causal, "launch_image_attention_mma", "the tensor-core kernel is not causal");
  if (shape.batch == 0 || shape.queries == 0) return;
  const dim3 grid((shape.queries + kRows - 1) / kRows, shape.batch * shape.heads);
  with_image_head_dim(shape.head_dim, [&](auto dim) {
    launch_kernel(image_attention_mma_kernel<decltype(dim)::value>, grid, kThreads, 0, ctx.stream(), q, k_half, v_half, shape, scale * kLog2e, y);
  });
  RF_GPU_CHECK_LAUNCH();
}

#else  // HIP: no tensor-core path yet (the portable kernel serves)

bool image_attention_mma_available(const DeviceContext&, int) { return false; }

void launch_image_attention_mma(const float*, const std::uint16_t*, const std::uint16_t*, const ImageAttentionShape&,
                                float, float*, const DeviceContext&) {
  throw_bad_launch("launch_image_attention_mma", "no tensor-core attention kernel in this build");
}

#endif

}  // namespace rf::gpu
