// Stable Diffusion's attention in fp32 (image_attention.h), flash style: a block takes a tile of
// queries of one head and streams the keys and values through shared memory in tiles, with an online
// softmax. Portable (no warp-level code): HIP's path, and CUDA's where the products must stay fp32.
#include <cfloat>
#include "backend/gpu/attention/image_attention.h"
#include "backend/gpu/attention/image_attention.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 128;
constexpr int kQueries = 8;  // a block's queries
constexpr int kKeys = 16;    // keys a pass; kQueries * kKeys == kThreads: a thread a score
static_assert(kQueries * kKeys == kThreads);

template <int kDim>
__global__ void __launch_bounds__(kThreads) image_attention_kernel(const float* q, const float* k, const float* v,
                                                                   ImageAttentionShape s, float scale, float* y) {
  __shared__ float q_tile[kQueries][kDim], k_tile[kKeys][kDim], v_tile[kKeys][kDim], o_tile[kQueries][kDim];
  __shared__ float p[kQueries][kKeys], row_max[kQueries], row_sum[kQueries], rescale[kQueries];
  const int image = blockIdx.y / s.heads, head = blockIdx.y % s.heads, first = blockIdx.x * kQueries, t = threadIdx.x;
  const int queries = s.queries;
  const int keys = s.causal ? min(s.keys, first + kQueries) : s.keys;  // those this block's queries see
  const std::size_t row = static_cast<std::size_t>(s.heads) * kDim;  // from one token's values to the next's
  const float* q_head = q + (static_cast<std::size_t>(image) * queries + first) * row + head * kDim;
  const float* k_head = k + static_cast<std::size_t>(image) * s.keys * row + head * kDim;
  const float* v_head = v + static_cast<std::size_t>(image) * s.keys * row + head * kDim;
  const int rows = min(kQueries, queries - first);
  for (int i = t; i < kQueries * kDim; i += kThreads) {
    q_tile[i / kDim][i % kDim] = i / kDim < rows ? q_head[i / kDim * row + i % kDim] * scale : 0.0f;
    o_tile[i / kDim][i % kDim] = 0.0f;
  }
  if (t < kQueries) row_max[t] = -FLT_MAX, row_sum[t] = 0.0f;
  for (int start = 0; start < keys; start += kKeys) {
    const int tile_keys = min(kKeys, keys - start);
    __syncthreads();  // the last pass is done with the tiles
    for (int i = t; i < kKeys * kDim; i += kThreads) {
      const bool real = i / kDim < tile_keys;
      const std::size_t at = (static_cast<std::size_t>(start) + i / kDim) * row + i % kDim;
      k_tile[i / kDim][i % kDim] = real ? k_head[at] : 0.0f;
      v_tile[i / kDim][i % kDim] = real ? v_head[at] : 0.0f;
    }
    __syncthreads();
    const int qi = t / kKeys, kj = t % kKeys;
    float score = 0.0f;
    for (int c = 0; c < kDim; ++c) score += q_tile[qi][c] * k_tile[kj][c];
    // Key 0 is in every row's first tile, so a row's maximum is a score from then on.
    const bool seen = kj < tile_keys && (!s.causal || start + kj <= first + qi);
    p[qi][kj] = seen ? score : -FLT_MAX;
    __syncthreads();
    if (t < kQueries) {
      float most = row_max[t];
      for (int j = 0; j < tile_keys; ++j) most = fmaxf(most, p[t][j]);
      float sum = 0.0f;
      for (int j = 0; j < kKeys; ++j) sum += (p[t][j] = j < tile_keys ? __expf(p[t][j] - most) : 0.0f);
      rescale[t] = __expf(row_max[t] - most);
      row_sum[t] = row_sum[t] * rescale[t] + sum;
      row_max[t] = most;
    }
    __syncthreads();
    for (int i = t; i < kQueries * kDim; i += kThreads) {
      const int r = i / kDim, c = i % kDim;
      float acc = o_tile[r][c] * rescale[r];
      for (int j = 0; j < kKeys; ++j) acc += p[r][j] * v_tile[j][c];
      o_tile[r][c] = acc;
    }
  }
  __syncthreads();
  float* out = y + (static_cast<std::size_t>(image) * queries + first) * row + head * kDim;
  for (int i = t; i < rows * kDim; i += kThreads) out[i / kDim * row + i % kDim] = o_tile[i / kDim][i % kDim] / row_sum[i / kDim];
}

}  // namespace

bool image_attention_supports(int head_dim) {
  return with_image_head_dim(head_dim, [](auto) {});
}

void check_image_attention(const ImageAttentionShape& shape, const char* launch) {
  require(shape.batch >= 0 && shape.heads > 0 && shape.queries >= 0 && shape.keys > 0, launch,
          "bad batch, head, query or key count");
  require(!shape.causal || shape.queries == shape.keys, launch, "causal attention needs as many keys as queries");
  require(image_attention_supports(shape.head_dim), launch, "head_dim must be 40, 64, 80, 128 or 160");
}

void launch_image_attention(const float* q, const float* k, const float* v, const ImageAttentionShape& shape,
                            float scale, float* y, const DeviceContext& ctx) {
  check_image_attention(shape, "launch_image_attention");
  if (shape.batch == 0 || shape.queries == 0) return;
  const dim3 grid((shape.queries + kQueries - 1) / kQueries, shape.batch * shape.heads);
  with_image_head_dim(shape.head_dim, [&](auto dim) {
    launch_kernel(image_attention_kernel<decltype(dim)::value>, grid, kThreads, 0, ctx.stream(), q, k, v, shape, scale, y);
  });
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
