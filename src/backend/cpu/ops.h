#pragma once
// The small per-token operations of a Llama-family decoder layer, in plain fp32. They are the CPU
// backend's implementation and the reference every GPU kernel is tested against.
#include <cstddef>

#include "model/config.h"

namespace rf::cpu {

// out = x / rms(x) * weight, rms over n elements. out may alias x.
void rms_norm(const float* x, const float* weight, std::size_t n, double eps, float* out);

// x += residual, then out = rms_norm(x): the residual stream update fused with the next norm.
void add_rms_norm(float* x, const float* residual, const float* weight, std::size_t n, double eps, float* out);

// Rotates each of n_heads heads of `x` (head_dim wide, contiguous) for position `pos`.
// inv_freq has rotary_dim / 2 entries; angles are computed in fp32 as Hugging Face does. Only the first
// rotary_dim dimensions of each head turn (0: all head_dim), the rest pass unchanged; cos and sin are
// multiplied by `scale` (LongRoPE's attention factor), as transformers does.
void rope(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, RopeLayout layout, int rotary_dim = 0,
          float scale = 1.0f);

// out[i] = silu(gate[i]) * up[i]
void silu_mul(const float* gate, const float* up, std::size_t n, float* out);

// out[i] = gelu(gate[i]) * up[i], gelu's tanh approximation (transformers' gelu_pytorch_tanh, ggml_gelu).
void gelu_tanh_mul(const float* gate, const float* up, std::size_t n, float* out);

// x[i] = cap * tanh(x[i] / cap): Gemma's soft-capping of attention scores and logits.
void softcap(float* x, std::size_t n, float cap);

// In-place softmax over n values (max-subtracted).
void softmax(float* x, std::size_t n);

}  // namespace rf::cpu
