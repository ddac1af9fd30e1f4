#pragma once
// Attention over the paged KV cache: the plan that picks the kernels for a batch, and the planned launch;
// and attention over dense heads by matrix products (attention_by_products.cu). Stable Diffusion's
// flash kernels: image_attention.h.
#include <cstddef>

#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/runtime/device_context.h"
#include "model/rope.h"

namespace rf::gpu {

// Which cache slots each token of a batch attends to, and how its scores are shaped: token t belongs
// to sequence seq[t] and sits at position positions[t]; it attends causally to positions
// 0..positions[t] of its sequence, or with a sliding window to the last `window` of them
// (positions[t] - window < p <= positions[t], as transformers' and llama.cpp's masks have it), whose
// slots come from block_tables[seq * max_blocks + position / block_size] (device arrays, as in
// model/batch.h). max_positions bounds positions[t] + 1 over the batch (sizes split-K work).
struct AttentionBatch {
  const std::int32_t* positions;
  const std::int32_t* seq;
  const std::int32_t* block_tables;
  int n_tokens;
  int max_blocks;
  int block_size;
  int max_positions;
  int window = 0;        // 0: the whole context
  float softcap = 0.0f;  // Gemma 2's cap on the scaled scores, cap * tanh(score / cap); 0: none

  // The most keys any token of the batch sees.
  int most_keys() const { return window > 0 && window < max_positions ? window : max_positions; }
};

// The head dims the kernels take: Llama-family models' (16 and 32: the small test fixtures) and
// Gemma's 256. They hold a row's dims in registers, one instantiation each. The prefill kernels stop at
// 128 (their tiles of 256 would not fit shared memory): tokens of wider heads all go through the decode
// kernel, which computes any token right, prefill's more slowly.
inline bool supported_head_dim(int head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 80 || head_dim == 96 || head_dim == 128 ||
         head_dim == 256;
}
inline bool prefill_kernels_take(int head_dim) { return supported_head_dim(head_dim) && head_dim <= 128; }

// How launch_attention serves a batch. Tokens alone in their sequence in the batch (decode steps) go to
// the decode kernel, cut into key ranges (flash-decoding) when the batch alone would not fill the GPU;
// the rest (prefill chunks) go to the flash-attention kernel.
struct AttentionPlan {
  bool tensor_cores;  // prefill through the mma.sync kernel (CUDA, sm_80+), else the portable one
  int decode_splits;  // key ranges per decode token, merged in the decode kernel when more than 1
  bool every_token_decodes = false;  // every token, prefill too, through the decode kernel
  int decode_heads = 0;  // query heads of a decode block; 0: the kernel's most (the GQA group, up to 8)
  // Decode blocks of 512 threads, a head each, in place of 128: a pass over 4 times the keys, for steps
  // of few blocks (one token), whose ranges would otherwise cost a merge through memory.
  bool decode_wide = false;
};

AttentionPlan plan_attention(const DeviceContext& ctx, const AttentionBatch& batch, HeadShape shape);

// The batch-invariant plan: every token through the decode kernel in one range of keys, so that a
// token's output bits depend on its own sequence alone, never on the batch around it (which the
// splits and the prefill kernels' tiles do). Slower for prefill and for long contexts.
AttentionPlan plan_batch_invariant_attention(const AttentionBatch& batch, HeadShape shape);

// Whether the tensor-core prefill kernel runs for head_dim on this build and device.
bool tensor_core_attention_available(const DeviceContext& ctx, int head_dim);

// Scratch of the plan's split partials (none for decode_splits == 1), and the counters that tell the
// last range of a token to merge them. clear_attention_workspace zeroes those counters (a memset of a
// few hundred bytes, on ctx's stream): before the first launch on a workspace, and again whenever a launch
// for another batch shape or plan may have used it since; launches of one shape and plan leave it clear
// for each other (a decode step's layers).
std::size_t attention_workspace_bytes(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape);
// The most that plan_attention's plan of any batch of up to max_tokens tokens needs, in a cache of
// max_blocks blocks a sequence (ranges grow with the context: these are the most).
std::size_t most_attention_workspace_bytes(const DeviceContext& ctx, int max_tokens, int max_blocks, int block_size, HeadShape shape);
void clear_attention_workspace(const AttentionPlan& plan, const AttentionBatch& batch, HeadShape shape, void* workspace,
                               const DeviceContext& ctx);

// RoPE and the KV append, done by the decode kernel instead of launch_rope_kv_append, for a batch whose
// every token is alone in its sequence (a decode step; with other tokens the result is wrong): the new
// tokens' k and v rows ([n_tokens][kv_dim], k not yet rotated), their cache slots, and RoPE's inverse
// frequencies and layout as launch_rope_kv_append takes them. q is then read unrotated, and left so.
struct DecodeRope {
  const float* k = nullptr;  // null: no fusion (q and the cache come rotated and appended)
  const float* v = nullptr;
  const std::int32_t* slots = nullptr;
  const float* inv_freq = nullptr;
  RopeLayout layout = RopeLayout::SplitHalves;
  // Floats from one token's q, k and v rows to the next's, where one GEMM made all three (rows of
  // q_dim + 2 kv_dim); 0: q and k, v are arrays of their own ([n_tokens][q_dim], [n_tokens][kv_dim]).
  int row_stride = 0;
};

// launch_attention with a given plan; workspace holds attention_workspace_bytes(plan, batch, shape).
// Where every token decodes (a fused RoPE, or the batch-invariant plan), `half` may take out's 16-bit
// copy for the o projection's GEMM, and `rounded` out rounded to int8 for its GEMV
// (launch_quantize_activations' bits; head dims a multiple of 32).
void launch_attention_planned(const AttentionPlan& plan, const float* q, KvCacheLayer cache, const AttentionBatch& batch,
                              HeadShape shape, float scale, float* out, void* workspace, const DeviceContext& ctx,
                              const DecodeRope& rope = {}, HalfCopy half = {}, QuantizedActivations rounded = {});

// Attention of batch_heads independent heads, q and y [batch_heads][queries][head_dim], k and v
// [batch_heads][keys][head_dim], of any head width and optionally causal (query i sees keys 0..i), by
// two matrix products a head around a row softmax (attention_by_products.cu); workspace holds
// attention_by_products_bytes. backend/cpu/image_ops.h's attention is the reference.
std::size_t attention_by_products_bytes(int queries, int keys, int head_dim);
void launch_attention_by_products(const float* q, const float* k, const float* v, int batch_heads, int queries, int keys,
                                  int head_dim, float scale, bool causal, float* y, void* workspace,
                                  const DeviceContext& ctx);

// Row r of `rows` rows of n values: softmax(scale * x) over its first values (all of them, or
// first_row + r + 1 with `causal`), zeros after; in place.
void launch_softmax_rows(float* x, int rows, int n, float scale, int first_row, bool causal, const DeviceContext& ctx);

}  // namespace rf::gpu
