#pragma once
// The decode GEMV (gemv.cu): a few tokens' products, weights decoded in registers.
#include <cstdint>
#include <span>

#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/runtime/device_context.h"
#include "formats/weight_matrix.h"

namespace rf::gpu {

// An RMSNorm that a single token's GEMV applies to its input itself (launch_rms_norm's, without its
// launch): the product is then W (x / rms(x) * weight), formed as (W (x * weight)) / rms(x), with x's
// sum of squares gathered as the GEMV reads x. No weight: no norm.
struct RmsNormOf {
  const float* weight = nullptr;
  float eps = 0.0f;
};

// A projection's input: x, and where the caller made them, its int8 copy (launch_quantize_activations)
// and its 16-bit copy. The GEMV's quantized weights multiply the int8 copy by integer dot products
// (a fifth of the instructions per weight of decoding to fp32; the result moves by x's rounding,
// relative 1e-3 to 1e-2, as in llama.cpp); other types read x. The GEMM takes the 16-bit copy. A GEMV
// of one token through the float path may fold x's norm (then x is the residual stream itself).
// fixed_order keeps one token's sums in the order of the kernels for several tokens (batch invariance),
// which the fastest kernel for one token's long quantized rows does not.
struct GemvInput {
  const float* x;
  QuantizedActivations rounded{};
  HalfCopy half{};
  RmsNormOf norm{};
  bool fixed_order = false;
  // The kernel before holds whole multiprocessors while this one's blocks start (AttentionPlan's wide
  // decode blocks): fewer, larger blocks then fit one wave of the rest.
  bool after_wide_attention = false;
  GemvInput(const float* x) : x(x) {}  // implicit: most inputs are x alone
  GemvInput(const float* x, QuantizedActivations rounded, HalfCopy half = {}) : x(x), rounded(rounded), half(half) {}
  GemvInput(const float* x, RmsNormOf norm) : x(x), norm(norm) {}
};

// Whether launch_gemv of w reads a GemvInput's int8 copy.
bool gemv_reads_rounded(DType type);

// y = W x for each of n_tokens vectors: y[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c], W in
// its stored type and device layout (device_layout.h), decoded in registers, in fp32. Each token's
// output has the same bits whatever n_tokens is (batch invariance), given x.fixed_order. Quantized rows must be whole
// blocks, Q4_K's data 16-byte aligned, x 16-byte aligned (device allocations are) and, for more than
// one token, the column count a multiple of 4. Fast for the few tokens of a decode step; prefill
// goes to launch_gemm. With `accumulate`, y += W x instead (a residual stream's update).
void launch_gemv(const WeightMatrix& w, GemvInput x, int n_tokens, float* y, const DeviceContext& ctx,
                 bool accumulate = false);

// One product of a group that shares its input x: out = W x (per token).
struct WeightProduct {
  WeightMatrix w;
  float* out;
};

// Up to three products of the same x in one launch (a layer's q, k and v): products[i].out =
// products[i].w x. The matrices share their type and column count.
void launch_gemv_group(std::span<const WeightProduct> products, GemvInput x, int n_tokens, const DeviceContext& ctx);

// out[t * rows + r] = swiglu((W_gate x_t)[r], (W_up x_t)[r]): the FFN's gate and up products, SwiGLU
// fused.
void launch_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, GemvInput x, int n_tokens, float* out,
                        const DeviceContext& ctx);

// A sparse layer's experts, stacked (expert e's matrix is a WeightMatrix's with data + e * stride), as
// a batch's routing picks them (backend/gpu/moe/moe.h's ExpertRoutes, on the device).
struct ExpertProducts {
  std::size_t stride;
  const std::int32_t* active;  // the routing's: the experts picked, then -1
  int active_slots;
  const std::int32_t* begin;   // the routing's: expert e's entries [begin[e], begin[e + 1])
  // The row of x an entry multiplies: the routing's `token` (gate and up multiply the tokens' input),
  // or null for the entry's own row (down multiplies each entry's activations).
  const std::int32_t* x_row;
  int most_entries;  // the most entries an expert may have: the batch's token count
};

// For each picked expert e and each of its entries i: y[i * w.rows + r] = sum_c W_e[r][c] * x[row(i) * w.cols
// + c], W_e read once for all its entries, the experts nobody picked not at all. As launch_gemv (its
// integer path where x has an int8 copy), given x.rounded's rows as x's. x takes no folded norm.
void launch_expert_gemv(const WeightMatrix& w, const ExpertProducts& experts, GemvInput x, float* y,
                        const DeviceContext& ctx);

// The same with gate and up, SwiGLU fused: y[i * rows + r] = swiglu((W_gate,e x)[r], (W_up,e x)[r]).
void launch_expert_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const ExpertProducts& experts,
                               GemvInput x, float* y, const DeviceContext& ctx);

}  // namespace rf::gpu
