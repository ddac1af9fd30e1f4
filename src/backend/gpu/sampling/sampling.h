#pragma once
// Sampling on the GPU: a step's logit rows become token ids without leaving the device, with the
// host sampler's semantics (engine/sampler.h, model/sampling.h): penalties over the sequence's
// recent tokens, then either the argmax (greedy) or top-k, top-p and min-p filtering and a draw at
// temperature. Draws come from a counter-based generator (Philox) keyed by the seed, so a seed
// gives the same tokens on every run; they are not the host sampler's tokens, only its distribution.
#include <cstdint>

#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/runtime/vendor.h"
#include "model/sampling.h"

namespace rf::gpu {

// One logit row's sampling, as the kernels read it from device memory.
struct RowSampling {
  float temperature;          // <= 0: greedy
  int top_k;                  // <= 0 or >= vocab: off
  double top_p;               // >= 1: off
  double min_p;               // <= 0: off
  float repetition_penalty;
  double presence_penalty;
  double frequency_penalty;
  std::uint64_t seed;
  std::uint64_t draw;         // the counter of this draw in the sequence's stream
  int history_begin;          // the penalty window: history[history_begin, + history_length)
  int history_length;
  int mask_begin;             // a grammar's mask (mask_logits): masks[mask_begin, + mask_words(vocab)); -1: none
};

RowSampling row_sampling(const SamplingParams& params, std::uint64_t draw, int history_begin, int history_length,
                         int mask_begin);

// The 64-bit words of one row's token mask.
inline int mask_words(int vocab) { return (vocab + 63) / 64; }

// The 64-bit words of launch_sample's scratch for `rows` rows of `vocab`.
std::size_t sample_scratch_keys(int rows, int vocab);

// For each of `rows` rows of `vocab` logits (modified by the masks and the penalties): tokens[r] =
// the row's pick. params, history, masks and tokens are device arrays (history null where no row has
// a penalty window, masks null where no row has a mask: those launches are then left out); counts is
// rows * vocab ints of zeroed scratch, which the launch leaves zeroed; scratch holds
// sample_scratch_keys(rows, vocab) words.
void launch_sample(float* logits, int rows, int vocab, const RowSampling* params, const std::int32_t* history,
                   const std::uint64_t* masks, std::int32_t* counts, std::uint64_t* scratch, std::int32_t* tokens,
                   const DeviceContext& ctx);

}  // namespace rf::gpu
