#pragma once
// The steps of flash attention on NVIDIA's tensor cores that the prefill kernel (prefill_mma.cu) and
// Stable Diffusion's (image_attention_mma.cu) share: a warp's 16 query rows against a tile of
// kTileKeys keys and values in shared memory (f16 rows of kStride halves), Q K^T and P V as
// mma.sync m16n8k16 with fp32 accumulation, and the online softmax in base 2 between them.
//
// Lane l holds C rows l/4 (c0, c1) and l/4 + 8 (c2, c3) at columns 2(l%4) + {0, 1} (tensor_core.cuh):
// an S fragment pair over 16 keys is therefore P's A fragment as it stands. Index [half] of a lane's
// row state is its row l/4 (half 0) or l/4 + 8 (half 1).
#include <cstdint>

#include "backend/gpu/common/tensor_core.cuh"

#if defined(ROCMFORGE_GPU_CUDA)

namespace rf::gpu::flash {

inline constexpr int kTileKeys = 64;
inline constexpr int kScoreTiles = kTileKeys / 8;  // n-tiles of 8 keys in a tile's scores

__device__ __forceinline__ unsigned pack_halves(float low, float high) {
  return float_to_half_bits(low) | static_cast<unsigned>(float_to_half_bits(high)) << 16;
}

// The ldmatrix row this lane addresses: lanes 8m..8m+7 give the rows of matrix m.
struct LaneMatrix {
  int matrix, row;
  __device__ explicit LaneMatrix(int lane) : matrix(lane / 8), row(lane % 8) {}
};

// Four query values of a row, times q_scale and rounded to f16, into a staging row of shared memory.
__device__ __forceinline__ void store_scaled_halves(std::uint16_t* row, float4 x, float q_scale) {
  *reinterpret_cast<uint2*>(row) =
      make_uint2(pack_halves(x.x * q_scale, x.y * q_scale), pack_halves(x.z * q_scale, x.w * q_scale));
}

// The warp's 16 staged query rows (from row first_row of `staged`) as A fragments, kSteps k-steps of 16.
template <int kSteps, int kStride>
__device__ __forceinline__ void query_fragments(unsigned (&q_frag)[kSteps][4], const std::uint16_t (*staged)[kStride],
                                                int first_row, LaneMatrix lm) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    load_matrices(q_frag[ks], &staged[first_row + lm.matrix % 2 * 8 + lm.row][ks * 16 + lm.matrix / 2 * 8]);
  }
}

// s = Q K^T for the warp's rows (q_frag, kSteps k-steps of 16 head dims) against the tile's keys.
template <int kSteps, int kStride>
__device__ __forceinline__ void tile_scores(float (&s)[kScoreTiles][4], const unsigned (&q_frag)[kSteps][4],
                                            const std::uint16_t (*k_tile)[kStride], LaneMatrix lm) {
#pragma unroll
  for (int nt = 0; nt < kScoreTiles; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
#pragma unroll
    for (int np = 0; np < kTileKeys / 16; ++np) {
      unsigned b[4];
      load_matrices(b, &k_tile[np * 16 + lm.matrix / 2 * 8 + lm.row][ks * 16 + lm.matrix % 2 * 8]);
      mma(s[2 * np], q_frag[ks], b[0], b[1]);
      mma(s[2 * np + 1], q_frag[ks], b[2], b[3]);
    }
  }
}

// Key j of the tile (its column in s) as this lane holds it: element e of n-tile nt.
__device__ __forceinline__ int tile_key(int lane, int nt, int e) { return nt * 8 + lane % 4 * 2 + e; }

// The online softmax over one tile of (masked: -inf) scores: each row's running max and sum move on,
// o is rescaled, and s becomes the tile's weights exp2(s - max). A row with every score so far masked
// keeps max -inf and weights 0.
template <int kOutTiles>
__device__ __forceinline__ void online_softmax(float (&s)[kScoreTiles][4], float (&o)[kOutTiles][4],
                                               float (&row_max)[2], float (&row_sum)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
    tile_max = fmaxf(tile_max, shuffle_xor(tile_max, 1));  // the 4 lanes of a row
    tile_max = fmaxf(tile_max, shuffle_xor(tile_max, 2));
    const float new_max = fmaxf(row_max[half], tile_max);
    const float reference = new_max == -INFINITY ? 0.0f : new_max;
    const float alpha = exp2f(row_max[half] - reference);
    row_max[half] = new_max;
    row_sum[half] *= alpha;
#pragma unroll
    for (int nt = 0; nt < kScoreTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& score = s[nt][2 * half + e];
        score = exp2f(score - reference);
        row_sum[half] += score;
      }
    }
#pragma unroll
    for (int nd = 0; nd < kOutTiles; ++nd) {
      o[nd][2 * half] *= alpha;
      o[nd][2 * half + 1] *= alpha;
    }
  }
}

// The weights as P's A fragments, rounded to f16.
__device__ __forceinline__ void weight_fragments(unsigned (&p)[kTileKeys / 16][4], const float (&s)[kScoreTiles][4]) {
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
    p[kk][0] = pack_halves(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack_halves(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_halves(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_halves(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// o += P V over the tile's values: kOutTiles n-tiles of 8 head dims, loaded in pairs.
template <int kOutTiles, int kStride>
__device__ __forceinline__ void accumulate_values(float (&o)[kOutTiles][4], const unsigned (&p)[kTileKeys / 16][4],
                                                  const std::uint16_t (*v_tile)[kStride], LaneMatrix lm) {
  static_assert(kOutTiles % 2 == 0, "head dims in pairs of 8");
#pragma unroll
  for (int kk = 0; kk < kTileKeys / 16; ++kk) {
#pragma unroll
    for (int dp = 0; dp < kOutTiles / 2; ++dp) {
      unsigned b[4];
      load_matrices_transposed(b, &v_tile[kk * 16 + lm.matrix % 2 * 8 + lm.row][dp * 16 + lm.matrix / 2 * 8]);
      mma(o[2 * dp], p[kk], b[0], b[1]);
      mma(o[2 * dp + 1], p[kk], b[2], b[3]);
    }
  }
}

// Each row's sum over the 4 lanes that hold its parts.
__device__ __forceinline__ void finish_sums(float (&row_sum)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    row_sum[half] += shuffle_xor(row_sum[half], 1);
    row_sum[half] += shuffle_xor(row_sum[half], 2);
  }
}

}  // namespace rf::gpu::flash

#endif
