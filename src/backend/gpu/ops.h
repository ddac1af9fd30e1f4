#pragma once
// The GPU kernels of a Llama decoder step, one launch_* wrapper each (kernels in the .cu file of the
// same name). All pointers are device pointers; every launch is asynchronous on `stream` and throws
// rf::Error for bad arguments or a failed launch. The CPU functions they mirror (backend/cpu/ops.h,
// quant.h) are the references their tests compare against.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/gpu/launch_check.h"
#include "backend/gpu/vendor.h"
#include "formats/weight_matrix.h"
#include "model/config.h"

namespace rf::gpu {

// out[t] = row tokens[t] of `table`, decoded to fp32 (any stored type). Token ids are the caller's
// to check, on the host, as the CPU backend does. With `previous`, a token previous_token(r)
// (model/batch.h) is previous[r]: a token sampled on the device and not yet seen by the host.
void launch_embedding(const WeightMatrix& table, const std::int32_t* tokens, int n_tokens, float* out,
                      gpuStream_t stream, const std::int32_t* previous = nullptr);

// Activations rounded to int8 for the GEMV's integer dot products, as llama.cpp's Q8_1: each token's
// values in blocks of 32 columns, value c of block b ~= scales[b] * codes[c], with scale = max |x| / 127
// and the block's code sum (which carries Q4_0's offset of 8). Token t's codes start at
// codes + t * cols, its scales and sums at t * cols / 32; cols is a multiple of 32.
struct QuantizedActivations {
  std::int8_t* codes = nullptr;
  float* scales = nullptr;
  std::int32_t* code_sums = nullptr;
};

// The three arrays of a buffer for up to `tokens` tokens of up to `cols` values, and its size in bytes.
QuantizedActivations quantized_activations_at(void* base, std::size_t tokens, std::size_t cols);
std::size_t quantized_activations_bytes(std::size_t tokens, std::size_t cols);

// out = x rounded as QuantizedActivations describes, for n_tokens rows of cols values.
void launch_quantize_activations(const float* x, int n_tokens, int cols, QuantizedActivations out, gpuStream_t stream);

// An activation's copy rounded to 16 bits (to nearest even) for a vendor BLAS's tensor-core GEMM,
// written by the kernel that makes the activation, so that the GEMM needs no rounding pass of its own
// (a launch and a wait each: about 1 us of a decode batch's layer on an H100). type: BF16 or F16.
struct HalfCopy {
  std::uint16_t* data = nullptr;
  DType type = DType::BF16;
};

// The 16-bit type a vendor BLAS multiplies weights of type `weights` in: bf16 for bf16, f16 for the
// others (f16, and quantized weights decoded to f16). f32 weights take SGEMM instead.
constexpr DType gemm_operand_type(DType weights) { return weights == DType::BF16 ? DType::BF16 : DType::F16; }

// Throws unless `half` is none or of a 16-bit type.
inline void check_half_copy(HalfCopy half, const char* launch) {
  require(!half.data || half.type == DType::BF16 || half.type == DType::F16, launch, "a 16-bit copy is bf16 or f16");
}

// For each of `rows` rows of n values: x += residual (when residual is not null), then
// out = x / rms(x) * weight: the residual update fused with the next norm. out may alias x. Where
// `rounded` has codes, out is also rounded into it (launch_quantize_activations), and where `half` has
// data, into that; both in the same pass where rows fit in registers.
void launch_rms_norm(float* x, const float* residual, const float* weight, int rows, int n, float eps, float* out,
                     gpuStream_t stream, QuantizedActivations rounded = {}, HalfCopy half = {});

struct HeadShape {
  int n_heads;     // query heads
  int n_kv_heads;  // key/value heads (n_heads a multiple of it)
  int head_dim;
};

// Qwen3's q/k norm, in place: every head of q ([n_tokens, q_dim]) and k ([n_tokens, kv_dim]) is
// rms-normalised over head_dim with the weight shared by all heads of q (q_weight) or k (k_weight).
void launch_qk_norm(float* q, float* k, const float* q_weight, const float* k_weight, int n_tokens, HeadShape shape,
                    float eps, gpuStream_t stream);

// One layer of the paged KV cache on the GPU: f16 rows of kv_dim values, the row of cache slot s
// (= block * block_size + offset, see backend/cpu/kv_cache.h) at s * kv_dim. f16 halves the bytes
// decode attention reads; keys and values stay far inside its range (|x| < 65504), and its 11-bit
// significand keeps them within 2^-11 relative of fp32.
struct KvCacheLayer {
  std::uint16_t* keys;
  std::uint16_t* values;
};

// Rotates q ([n_tokens, q_dim], in place) and k by RoPE at each token's position and appends the
// rotated k and the unchanged v ([n_tokens, kv_dim]) to the cache at slots[t]. inv_freq holds
// head_dim / 2 inverse frequencies, scaling (linear, llama3) already applied (rope_inv_freq).
void launch_rope_kv_append(float* q, const float* k, const float* v, const std::int32_t* positions,
                           const std::int32_t* slots, int n_tokens, HeadShape shape, const float* inv_freq,
                           RopeLayout layout, KvCacheLayer cache, gpuStream_t stream);

// out[i] = silu(gate[i]) * up[i] for n values; out may alias gate or up. Where `half` has data, out is
// also written there rounded.
void launch_swiglu(const float* gate, const float* up, std::size_t n, float* out, gpuStream_t stream, HalfCopy half = {});

// SwiGLU of a stacked gate and up product (each row `width` gate values, then `width` up values),
// written only as the 16-bit copy that the next GEMM multiplies: out.data[r * width + i].
void launch_swiglu_stacked(const float* gate_up, int rows, int width, HalfCopy out, gpuStream_t stream);

// x[r * width + i] += bias[i] for each of `rows` rows: Qwen2's q/k/v biases.
void launch_add_bias(float* x, const float* bias, int rows, int width, gpuStream_t stream);

// In-place softmax over each of `rows` rows of n values.
void launch_softmax(float* x, int rows, int n, gpuStream_t stream);

// An RMSNorm that a single token's GEMV applies to its input itself (launch_rms_norm's, without its
// launch): the product is then W (x / rms(x) * weight), formed as (W (x * weight)) / rms(x), with x's
// sum of squares gathered as the GEMV reads x. No weight: no norm.
struct RmsNormOf {
  const float* weight = nullptr;
  float eps = 0.0f;
};

// A projection's input: x, and where the caller made them, its int8 copy (launch_quantize_activations)
// and its 16-bit copy. The GEMV's Q8_0 and Q4_0 weights multiply the int8 copy by integer dot products
// (a fifth of the instructions per weight of decoding to fp32; the result moves by x's rounding,
// relative 1e-3 to 1e-2, as in llama.cpp); other types read x. The GEMM takes the 16-bit copy. A GEMV
// of one token through the float path may fold x's norm (then x is the residual stream itself).
// fixed_order keeps one token's sums in the order of the kernels for several tokens (batch invariance),
// which the fastest kernel for one token's long Q8_0 and Q4_0 rows does not.
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
void launch_gemv(const WeightMatrix& w, GemvInput x, int n_tokens, float* y, gpuStream_t stream,
                 bool accumulate = false);

// One product of a group that shares its input x: out = W x (per token).
struct WeightProduct {
  WeightMatrix w;
  float* out;
};

// Up to three products of the same x in one launch (a layer's q, k and v): products[i].out =
// products[i].w x. The matrices share their type and column count.
void launch_gemv_group(std::span<const WeightProduct> products, GemvInput x, int n_tokens, gpuStream_t stream);

// out[t * rows + r] = swiglu((W_gate x_t)[r], (W_up x_t)[r]): the FFN's gate and up products, SwiGLU
// fused.
void launch_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, GemvInput x, int n_tokens, float* out,
                        gpuStream_t stream);

// ---- Declared for the next step; implemented in gemm*.cu / attention*.cu. ----

// Vendor BLAS handle and scratch for prefill GEMMs (cuBLAS on CUDA, rocBLAS/hipBLAS where CMake
// finds them on HIP, else the project's tiled kernel). One per stream; not thread-safe.
class GemmContext;
}  // namespace rf::gpu

// The context is defined by the vendor glue alone, so it is deleted there too: callers hold it without
// ever seeing its definition.
template <>
struct std::default_delete<rf::gpu::GemmContext> {
  void operator()(rf::gpu::GemmContext* ctx) const;
};

namespace rf::gpu {

std::unique_ptr<GemmContext> make_gemm_context(gpuStream_t stream);

// Whether launch_gemm_group multiplies a HalfCopy it is given (vendor BLAS builds), or x always (the
// tiled kernel of HIP builds without one, which multiplies in fp32).
bool gemm_takes_half_copy();

// For each product, out[t * w.rows + r] = sum_c W[r][c] * x[t * w.cols + c] for t < n_tokens: the
// prefill products (n_tokens > 1; the decode GEMV above serves n_tokens == 1), any stored type of W.
// The products of one group share x, so it is prepared (rounded for the tensor cores) once, or not at
// all where `half` is x already rounded to the type the products need.
void launch_gemm_group(GemmContext& ctx, std::span<const WeightProduct> products, const float* x, int n_tokens,
                       HalfCopy half = {});

inline void launch_gemm(GemmContext& ctx, const WeightMatrix& w, const float* x, int n_tokens, float* out) {
  const WeightProduct product{w, out};
  launch_gemm_group(ctx, std::span(&product, 1), x, n_tokens);
}

// Which cache slots each token of a batch attends to: token t belongs to sequence seq[t] and sits at
// position positions[t]; it attends causally to positions 0..positions[t] of its sequence, whose
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
};

// out[t, h*head_dim + d] = softmax(q_t,h . K^T * scale) V over the cached keys/values of the layer,
// GQA mapping head h to kv head h / (n_heads / n_kv_heads). Flash attention for prefill chunks,
// split-sequence (flash-decoding) for single-token decode; never materialises the score matrix.
void launch_attention(const float* q, KvCacheLayer cache, const AttentionBatch& batch, HeadShape shape, float scale,
                      float* out, gpuStream_t stream);

}  // namespace rf::gpu
