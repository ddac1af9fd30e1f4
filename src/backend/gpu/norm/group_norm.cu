// GroupNorm (with SiLU after it where ResNet blocks fuse the two) and LayerNorm: Stable Diffusion's
// norms, twins of backend/cpu/image_ops. Each mean comes before the spread about it, so that values
// far from zero keep their precision.
//
// A group of GroupNorm spans a whole image's worth of a few channels: far too few groups to fill the
// device one block each. So each group is cut into chunks, one block each, in two kernels: the first
// takes each chunk's moments (count, mean and the squared deviations about that mean), the second
// combines its group's chunks by Chan's parallel formula and normalises its chunk.
#include <algorithm>
#include <limits>

#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kVectors = 2;                   // float4s a thread loads at once: more bytes in flight
constexpr int kPerThread = 4 * kVectors;      // values a thread holds of a tile
constexpr int kTile = kThreads * kPerThread;  // values a block takes per step through its chunk

// The chunking: enough blocks over all groups to fill a large device several times over, chunks no
// shorter than a tile (shorter ones pay a block's fixed costs for little work), and few enough
// chunks that a block combines its group's in one step.
constexpr std::size_t kBlocksWanted = 1024;
constexpr std::size_t kMinChunk = kTile;
constexpr std::size_t kMaxChunks = 64;
static_assert(kMaxChunks <= kThreads, "the apply kernel reads one chunk's moments per thread");

// Moments of `count` values: their mean and m2, the sum of their squared deviations from that mean.
struct Moments {
  float count = 0.0f;
  float mean = 0.0f;
  float m2 = 0.0f;
};

// An image's `groups` groups of per_group channels of `spatial` values, `size` values in all, and how
// each is cut: `chunks` chunks of `chunk` values (the last may be shorter).
struct GroupSplit {
  int groups;
  int per_group;
  int spatial;
  std::size_t size;
  std::size_t chunk;
  int chunks;
};

GroupSplit split_groups(int batch, int channels, int spatial, int groups) {
  GroupSplit split{groups, channels / groups, spatial, static_cast<std::size_t>(channels / groups) * spatial, 0, 0};
  const std::size_t images_groups = static_cast<std::size_t>(batch) * groups;
  const std::size_t wanted = (kBlocksWanted + images_groups - 1) / images_groups;
  const std::size_t chunks = std::clamp<std::size_t>(std::min(wanted, split.size / kMinChunk), 1, kMaxChunks);
  // Whole float4s per chunk; rounding up may leave fewer chunks.
  split.chunk = ((split.size + chunks - 1) / chunks + 3) / 4 * 4;
  split.chunks = static_cast<int>((split.size + split.chunk - 1) / split.chunk);
  return split;
}

// The values [begin, end) of its group that block (c, g) takes: chunk c.
struct Span {
  std::size_t begin;
  std::size_t end;
};

__device__ Span chunk_span(const GroupSplit& split) {
  const std::size_t begin = blockIdx.x * split.chunk;
  return {begin, begin + split.chunk < split.size ? begin + split.chunk : split.size};
}

__device__ float silu(float v) { return v / (1.0f + __expf(-v)); }

// Chan's merge of moments b into a: the spread of each about its own mean, plus that of the two
// means about the merged one.
__device__ void merge(Moments& a, const Moments& b) {
  const float count = a.count + b.count;
  const float d = b.mean - a.mean;
  a.mean += d * (b.count / count);
  a.m2 += b.m2 + d * d * (a.count * b.count / count);
  a.count = count;
}

// Chan's formula over the moments of all the block's threads (count 0 where a thread has none),
// `count` values in all; every thread gets the whole's.
__device__ Moments combine(const Moments& part, float count) {
  const float mean = block_sum<kThreads>(part.count * part.mean) / count;
  const float d = part.mean - mean;
  return {count, mean, block_sum<kThreads>(part.m2 + part.count * d * d)};
}

// Where this thread's value j of the tile at `base` lies in its group: whole float4s in the vector
// path, single values otherwise; consecutive threads read consecutive addresses either way.
template <bool kVector>
__device__ std::size_t tile_index(std::size_t base, int j) {
  if constexpr (kVector) return base + (static_cast<std::size_t>(j / 4) * kThreads + threadIdx.x) * 4 + j % 4;
  return base + static_cast<std::size_t>(j) * kThreads + threadIdx.x;
}

// Loads this thread's values of the tile at `base` that lie before `end`, and returns how many:
// they are a prefix of v, since the indices grow with j.
template <bool kVector>
__device__ int load_tile(const float* group, std::size_t base, std::size_t end, float (&v)[kPerThread]) {
  int count = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; j += kVector ? 4 : 1) {
    const std::size_t i = tile_index<kVector>(base, j);
    if (i >= end) continue;
    if constexpr (kVector) {
      const float4 q = *reinterpret_cast<const float4*>(group + i);
      v[j] = q.x, v[j + 1] = q.y, v[j + 2] = q.z, v[j + 3] = q.w;
      count += 4;
    } else {
      v[j] = group[i];
      ++count;
    }
  }
  return count;
}

template <bool kVector>
__device__ void store_tile(const float (&v)[kPerThread], std::size_t base, std::size_t end, float* group) {
#pragma unroll
  for (int j = 0; j < kPerThread; j += kVector ? 4 : 1) {
    const std::size_t i = tile_index<kVector>(base, j);
    if (i >= end) continue;
    if constexpr (kVector) {
      *reinterpret_cast<float4*>(group + i) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
    } else {
      group[i] = v[j];
    }
  }
}

// The moments of v's first `count` values, mean then spread.
__device__ Moments tile_moments(const float (&v)[kPerThread], int count) {
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) sum += j < count ? v[j] : 0.0f;
  const float mean = sum / static_cast<float>(count);
  float m2 = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) m2 += j < count ? (v[j] - mean) * (v[j] - mean) : 0.0f;
  return {static_cast<float>(count), mean, m2};
}

// Block (c, g) writes the moments of chunk c of group g (image g / groups) to moments[g * chunks + c].
// Each thread merges the moments of its values tile by tile, so the values are read once.
template <bool kVector>
__global__ void __launch_bounds__(kThreads) group_moments_kernel(const float* x, GroupSplit split, Moments* moments) {
  const float* group = x + blockIdx.y * split.size;
  const Span span = chunk_span(split);
  Moments own;
  for (std::size_t base = span.begin; base < span.end; base += kTile) {
    float v[kPerThread] = {};
    const int count = load_tile<kVector>(group, base, span.end, v);
    if (count > 0) merge(own, tile_moments(v, count));
  }
  const Moments chunk = combine(own, static_cast<float>(span.end - span.begin));
  if (threadIdx.x == 0) moments[blockIdx.y * split.chunks + blockIdx.x] = chunk;
}

// Block (c, g) normalises chunk c of group g with the moments of all of g's chunks. Each value is
// read before it is written and by the same thread, so y may alias x.
template <bool kVector>
__global__ void __launch_bounds__(kThreads) group_apply_kernel(const float* x, const Moments* moments, GroupSplit split,
                                                               const float* gamma, const float* beta, float eps,
                                                               bool silu_after, float* y) {
  const int chunk = static_cast<int>(threadIdx.x);  // whose moments this thread brings
  const Moments part = chunk < split.chunks ? moments[blockIdx.y * split.chunks + chunk] : Moments{};
  const Moments whole = combine(part, static_cast<float>(split.size));
  const float inv_std = rsqrtf(whole.m2 / whole.count + eps);
  const std::size_t offset = blockIdx.y * split.size;
  const Span span = chunk_span(split);
  const int first = static_cast<int>(blockIdx.y % split.groups) * split.per_group;
  constexpr int kWidth = kVector ? 4 : 1;  // values that share a channel: a float4 never straddles two
  for (std::size_t base = span.begin; base < span.end; base += kTile) {
    float v[kPerThread] = {};
    load_tile<kVector>(x + offset, base, span.end, v);
#pragma unroll
    for (int j = 0; j < kPerThread; j += kWidth) {
      const std::size_t i = tile_index<kVector>(base, j);
      if (i >= span.end) continue;
      // A 32-bit division, far cheaper than a 64-bit one: launch_group_norm requires groups to fit.
      const int c = first + static_cast<int>(static_cast<unsigned>(i) / static_cast<unsigned>(split.spatial));
      const float scale = inv_std * gamma[c];
#pragma unroll
      for (int k = j; k < j + kWidth; ++k) {
        const float n = (v[k] - whole.mean) * scale + beta[c];
        v[k] = silu_after ? silu(n) : n;
      }
    }
    store_tile<kVector>(v, base, span.end, y + offset);
  }
}

__global__ void __launch_bounds__(kThreads) layer_norm_kernel(const float* x, int n, const float* gamma,
                                                              const float* beta, float eps, float* y) {
  const float* in = x + static_cast<std::size_t>(blockIdx.x) * n;
  float* out = y + static_cast<std::size_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += in[i];
  const float mean = block_sum<kThreads>(sum) / static_cast<float>(n);
  float squares = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) squares += (in[i] - mean) * (in[i] - mean);
  const float inv_std = rsqrtf(block_sum<kThreads>(squares) / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads) out[i] = (in[i] - mean) * inv_std * gamma[i] + beta[i];
}

// The moments of every chunk, then the normalisation once they are all written.
template <bool kVector>
void launch_group_kernels(const float* x, const GroupSplit& split, int batch, const float* gamma, const float* beta,
                          float eps, bool silu_after, float* y, Moments* moments, const DeviceContext& ctx) {
  const dim3 grid(split.chunks, batch * split.groups);
  launch_kernel(group_moments_kernel<kVector>, grid, kThreads, 0, ctx.stream(), x, split, moments);
  RF_GPU_CHECK_LAUNCH();
  launch_kernel(group_apply_kernel<kVector>, grid, kThreads, 0, ctx.stream(), x, moments, split, gamma, beta, eps, silu_after, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace

std::size_t group_norm_workspace_bytes(int batch, int channels, int spatial, int groups) {
  require(batch >= 0 && spatial > 0 && groups > 0 && channels % groups == 0, "group_norm_workspace_bytes",
          "channels must split into whole groups");
  if (batch == 0) return 0;
  return static_cast<std::size_t>(batch) * groups * split_groups(batch, channels, spatial, groups).chunks *
         sizeof(Moments);
}

void launch_group_norm(const float* x, int batch, int channels, int spatial, int groups, const float* gamma,
                       const float* beta, float eps, bool silu_after, float* y, void* workspace,
                       const DeviceContext& ctx) {
  require(batch >= 0 && spatial > 0 && groups > 0 && channels % groups == 0, "launch_group_norm",
          "channels must split into whole groups");
  constexpr int kMaxGroups = 65535;  // a grid's y extent
  require(static_cast<long long>(batch) * groups <= kMaxGroups, "launch_group_norm", "too many groups in the batch");
  if (batch == 0) return;
  require(workspace != nullptr, "launch_group_norm", "needs group_norm_workspace_bytes of workspace");
  const GroupSplit split = split_groups(batch, channels, spatial, groups);
  require(split.size <= std::numeric_limits<unsigned>::max(), "launch_group_norm",
          "a group too large for 32-bit indices");
  auto* moments = static_cast<Moments*>(workspace);
  if (spatial % 4 == 0 && is_aligned(x, 16) && is_aligned(y, 16)) {
    launch_group_kernels<true>(x, split, batch, gamma, beta, eps, silu_after, y, moments, ctx);
  } else {
    launch_group_kernels<false>(x, split, batch, gamma, beta, eps, silu_after, y, moments, ctx);
  }
}

void launch_layer_norm(const float* x, int rows, int n, const float* gamma, const float* beta, float eps, float* y,
                       const DeviceContext& ctx) {
  require(rows >= 0 && n > 0, "launch_layer_norm", "empty rows");
  if (rows == 0) return;
  launch_kernel(layer_norm_kernel, rows, kThreads, 0, ctx.stream(), x, n, gamma, beta, eps, y);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
