// Sampling kernels: the penalties; then the largest logit of each slice of a row, many blocks a row;
// then one block per row picks the argmax from those, or filters (top-k, top-p, min-p) and draws by
// the Gumbel-max trick: argmax of logit / temperature + Gumbel noise picks each survivor with
// probability proportional to exp(logit / temperature), in one pass.
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/common/philox.cuh"
#include "backend/gpu/common/reduce.cuh"
#include "backend/gpu/sampling/sampling.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu {

namespace {

using u64 = unsigned long long;

constexpr int kPenaltyThreads = 256;
constexpr int kMaskThreads = 256;
constexpr int kSampleThreads = 1024;
constexpr int kBins = 256;  // the radix selection reads the 64-bit keys a byte at a time
// The slices' pass: a block reads kSliceThreads * kSliceDepth logits, each thread kSliceDepth loads
// deep. One block a row would wait on its loads one after another (measured: docs/perf_history.md, v13).
constexpr int kSliceThreads = 256;
constexpr int kSliceDepth = 16;
constexpr int kSliceLogits = kSliceThreads * kSliceDepth;
static_assert(kSampleThreads >= kBins);
// Probabilities in fixed point, so that sums are exact and do not depend on the order of atomics
// (the same seed must give the same tokens): 2^36 for 1 leaves room for 2^28 tokens in 64 bits.
constexpr double kFixedOne = 68719476736.0;

// One block per row. Counts the window's tokens in the row's scratch, then the first thread to take a
// token's count (leaving it zero again) applies that token's penalty once, as the host sampler does.
// The _rn intrinsics keep the compiler from fusing the steps into an FMA the host does not do.
__global__ void __launch_bounds__(kPenaltyThreads)
    penalty_kernel(float* logits, int vocab, const RowSampling* params, const std::int32_t* history,
                   std::int32_t* counts) {
  const RowSampling p = params[blockIdx.x];
  if (p.history_length == 0) return;
  float* row = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  std::int32_t* count = counts + static_cast<std::size_t>(blockIdx.x) * vocab;
  const std::int32_t* window = history + p.history_begin;
  for (int i = threadIdx.x; i < p.history_length; i += kPenaltyThreads) {
    if (window[i] >= 0 && window[i] < vocab) atomicAdd(&count[window[i]], 1);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < p.history_length; i += kPenaltyThreads) {
    const int id = window[i];
    if (id < 0 || id >= vocab) continue;
    const int n = atomicExch(&count[id], 0);
    if (n == 0) continue;
    const float l = row[id];
    const float scaled = l > 0 ? l / p.repetition_penalty : __fmul_rn(l, p.repetition_penalty);
    row[id] = scaled - static_cast<float>(__dadd_rn(__dmul_rn(n, p.frequency_penalty), p.presence_penalty));
  }
}

// A block per kMaskThreads tokens of a row (grid.y): a token its row's mask leaves out gets -infinity.
__global__ void __launch_bounds__(kMaskThreads)
    mask_kernel(float* logits, int vocab, const RowSampling* params, const u64* masks) {
  const int begin = params[blockIdx.y].mask_begin;
  const int id = blockIdx.x * kMaskThreads + threadIdx.x;
  if (begin < 0 || id >= vocab) return;
  if (!((masks[begin + id / 64] >> (id % 64)) & 1)) logits[static_cast<std::size_t>(blockIdx.y) * vocab + id] = -INFINITY;
}

// The host sampler's order as one integer per token: higher logit first, lower id first among equals.
__device__ u64 sort_key(float logit, int id) {
  const unsigned bits = __float_as_uint(logit);
  const unsigned ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);  // float order as unsigned order
  return static_cast<u64>(ordered) << 32 | (0xFFFFFFFFu - static_cast<unsigned>(id));
}

__device__ u64 larger(u64 a, u64 b) { return a > b ? a : b; }

// Greedy's order as one integer: sort_key's, with NaN below every number (0 stands for no token).
__device__ u64 greedy_key(float logit, int id) {
  return isnan(logit) ? 0xFFFFFFFFu - static_cast<unsigned>(id) : sort_key(logit, id);
}

// The logit and the id a sort_key holds.
__device__ float key_logit(u64 key) {
  const unsigned ordered = static_cast<unsigned>(key >> 32);
  return __uint_as_float((ordered & 0x80000000u) ? (ordered & 0x7FFFFFFFu) : ~ordered);
}
__device__ int key_id(u64 key) { return static_cast<int>(0xFFFFFFFFu - static_cast<unsigned>(key)); }

// The tokens whose key reaches a threshold, as the radix selection leaves it: the masked high bytes
// at least `prefix` (mask 0 admits everything).
struct KeyThreshold {
  u64 prefix = 0;
  u64 mask = 0;
  __device__ bool admits(u64 key) const { return (key & mask) >= prefix; }
};

// The smallest of each thread's `index` (indices below 2^24 are exact as floats).
__device__ int block_min_index(int index) { return -static_cast<int>(block_max<kSampleThreads>(-static_cast<float>(index))); }

// Every thread's v combined through a shared word that starts at 0: combine(&word, v) is an atomic.
template <class Combine>
__device__ u64 block_combine_u64(u64 v, Combine combine) {
  __shared__ u64 word;
  if (threadIdx.x == 0) word = 0;
  __syncthreads();
  combine(&word, v);
  __syncthreads();
  const u64 result = word;
  __syncthreads();
  return result;
}

__device__ u64 block_sum_u64(u64 v) {
  return block_combine_u64(v, [](u64* word, u64 x) { atomicAdd(word, x); });
}

__device__ u64 block_max_u64(u64 v) {
  return block_combine_u64(v, [](u64* word, u64 x) { atomicMax(word, x); });
}

// The highest threshold whose admitted candidates weigh at least `target` (> 0, at most their total
// weight): the key of the token where the host sampler's sorted prefix first reaches the target.
// Chosen a key byte at a time from the top, by a histogram of the candidates that share the bytes
// chosen so far; it stops once the chosen bin holds a single candidate, which is then the key itself.
// candidate(i, logit, weight) says whether token i takes part, and its weight.
template <class Candidate>
__device__ KeyThreshold select_threshold(const float* row, int vocab, u64 target, Candidate candidate) {
  __shared__ u64 bin_weight[kBins];
  __shared__ unsigned bin_count[kBins];
  __shared__ u64 suffix[kBins];  // weight of the bins from this one up
  __shared__ int chosen;
  KeyThreshold threshold;
  u64 above = 0;  // weight of the candidates above the chosen bins
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kSampleThreads) {
      bin_weight[b] = 0;
      bin_count[b] = 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += kSampleThreads) {
      const float logit = row[i];
      const u64 key = sort_key(logit, i);
      u64 weight = 0;
      if ((key & threshold.mask) != threshold.prefix || !candidate(i, logit, weight)) continue;
      const int bin = static_cast<int>(key >> shift) & (kBins - 1);
      atomicAdd(&bin_weight[bin], weight);
      atomicAdd(&bin_count[bin], 1u);
    }
    __syncthreads();
    const int b = threadIdx.x;
    if (b < kBins) suffix[b] = bin_weight[b];
    __syncthreads();
    for (int step = 1; step < kBins; step *= 2) {
      const u64 add = b + step < kBins ? suffix[b + step] : 0;
      __syncthreads();
      if (b < kBins) suffix[b] += add;
      __syncthreads();
    }
    if (b < kBins) {
      const u64 from_here = above + suffix[b], from_next = above + (b + 1 < kBins ? suffix[b + 1] : 0);
      if (from_here >= target && from_next < target) chosen = b;
    }
    __syncthreads();
    const int bin = chosen;
    above += bin + 1 < kBins ? suffix[bin + 1] : 0;
    threshold.prefix |= static_cast<u64>(bin) << shift;
    threshold.mask |= static_cast<u64>(kBins - 1) << shift;
    const bool single = bin_count[bin] == 1;
    __syncthreads();  // all have read this pass's shared state before the next pass clears it
    if (single) break;
  }
  return threshold;
}

__device__ float gumbel(u64 seed, u64 draw, int index) {
  return -logf(-logf(philox_uniform(seed, draw, static_cast<unsigned>(index))));
}

__host__ __device__ int slices_of(int vocab) { return (vocab + kSliceLogits - 1) / kSliceLogits; }

// Blocks (slices, rows): best[row][slice] = the greedy_key of the slice's best logit.
__global__ void __launch_bounds__(kSliceThreads) slice_best_kernel(const float* logits, int vocab, u64* best) {
  const float* row = logits + static_cast<std::size_t>(blockIdx.y) * vocab;
  const int first = blockIdx.x * kSliceLogits + threadIdx.x;
  float values[kSliceDepth];
#pragma unroll
  for (int k = 0; k < kSliceDepth; ++k) {
    const int i = first + k * kSliceThreads;
    values[k] = i < vocab ? row[i] : 0.0f;
  }
  u64 key = 0;
#pragma unroll
  for (int k = 0; k < kSliceDepth; ++k) {
    const int i = first + k * kSliceThreads;
    if (i < vocab) key = larger(key, greedy_key(values[k], i));
  }
  key = block_max_u64(key);
  if (threadIdx.x == 0) best[static_cast<std::size_t>(blockIdx.y) * gridDim.x + blockIdx.x] = key;
}

// One block per row, after slice_best_kernel.
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const float* logits, int vocab, const RowSampling* params, const u64* slice_best, std::int32_t* tokens) {
  const RowSampling p = params[blockIdx.x];
  const float* row = logits + static_cast<std::size_t>(blockIdx.x) * vocab;

  // The largest logit and the first token that has it: greedy's pick (as std::max_element, NaN aside).
  const int slices = slices_of(vocab);
  u64 best = 0;
  for (int s = threadIdx.x; s < slices; s += kSampleThreads) best = larger(best, slice_best[static_cast<std::size_t>(blockIdx.x) * slices + s]);
  best = block_max_u64(best);
  const float largest = key_logit(best);
  const int first = key_id(best);
  if (p.temperature <= 0) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = first;
    return;
  }

  // A grammar's mask leaves most of a row at -infinity, every one of them the same key's high half:
  // the selections leave those out, or their histograms' atomics would all hit one bin. That
  // changes nothing drawn: where at most k tokens are finite, top-k cuts nothing finite.
  KeyThreshold top_k;
  if (p.top_k > 0 && p.top_k < vocab) {
    u64 finite = 0;
    for (int i = threadIdx.x; i < vocab; i += kSampleThreads) finite += row[i] != -INFINITY;
    if (block_sum_u64(finite) > static_cast<u64>(p.top_k)) {
      top_k = select_threshold(row, vocab, static_cast<u64>(p.top_k), [](int, float logit, u64& weight) {
        weight = 1;
        return logit != -INFINITY;
      });
    }
  }
  // Top-p over the top-k survivors, by their probabilities at temperature 1 (relative to the largest).
  const auto fixed_prob = [largest](float logit) { return static_cast<u64>(expf(logit - largest) * kFixedOne); };
  KeyThreshold top_p;
  if (p.top_p < 1.0) {
    u64 mass = 0;
    for (int i = threadIdx.x; i < vocab; i += kSampleThreads) {
      if (top_k.admits(sort_key(row[i], i))) mass += fixed_prob(row[i]);
    }
    const u64 total = block_sum_u64(mass);
    // Reaching top_p of the total, kept in [1, total] whatever the double rounding of the product.
    const u64 wanted = static_cast<u64>(ceil(p.top_p * static_cast<double>(total)));
    const u64 target = wanted < 1 ? 1 : wanted > total ? total : wanted;
    // Candidates of no weight (-infinity among them) cannot move the threshold: left out.
    top_p = select_threshold(row, vocab, target, [&](int i, float logit, u64& weight) {
      if (!top_k.admits(sort_key(logit, i))) return false;
      weight = fixed_prob(logit);
      return weight > 0;
    });
  }

  // The draw among the survivors; min-p keeps those within min_p of the largest probability.
  float best_score = -INFINITY;
  int pick = vocab;
  for (int i = threadIdx.x; i < vocab; i += kSampleThreads) {
    const float logit = row[i];
    const u64 key = sort_key(logit, i);
    if (!top_k.admits(key) || !top_p.admits(key)) continue;
    const float relative = logit - largest;
    if (p.min_p > 0 && exp(static_cast<double>(relative)) < p.min_p) continue;
    const float score = relative / p.temperature + gumbel(p.seed, p.draw, i);
    if (pick == vocab || score > best_score) {
      best_score = score;
      pick = i;
    }
  }
  const float top = block_max<kSampleThreads>(best_score);
  const int chosen = block_min_index(best_score == top ? pick : vocab);
  if (threadIdx.x == 0) tokens[blockIdx.x] = chosen;
}

}  // namespace

std::size_t sample_scratch_keys(int rows, int vocab) { return static_cast<std::size_t>(rows) * slices_of(vocab); }

void launch_sample(float* logits, int rows, int vocab, const RowSampling* params, const std::int32_t* history,
                   const std::uint64_t* masks, std::int32_t* counts, std::uint64_t* scratch, std::int32_t* tokens,
                   const DeviceContext& ctx) {
  require(rows >= 0 && vocab > 0 && vocab < (1 << 24), "launch_sample", "vocabulary must hold 1 to 2^24 tokens");
  if (rows == 0) return;
  if (masks) {
    launch_kernel(mask_kernel, dim3((vocab + kMaskThreads - 1) / kMaskThreads, rows), kMaskThreads, 0, ctx.stream(), logits, vocab, params, reinterpret_cast<const u64*>(masks));
    RF_GPU_CHECK_LAUNCH();
  }
  if (history) {
    launch_kernel(penalty_kernel, rows, kPenaltyThreads, 0, ctx.stream(), logits, vocab, params, history, counts);
    RF_GPU_CHECK_LAUNCH();
  }
  auto* slice_best = reinterpret_cast<u64*>(scratch);
  launch_kernel(slice_best_kernel, dim3(slices_of(vocab), rows), kSliceThreads, 0, ctx.stream(), logits, vocab, slice_best);
  RF_GPU_CHECK_LAUNCH();
  launch_kernel(sample_kernel, rows, kSampleThreads, 0, ctx.stream(), logits, vocab, params, slice_best, tokens);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace rf::gpu
