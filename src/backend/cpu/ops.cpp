#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

namespace rf::cpu {

void rms_norm(const float* x, const float* weight, std::size_t n, double eps, float* out) {
  float sum_sq = 0.0f;
  for (std::size_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + static_cast<float>(eps));
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void add_rms_norm(float* x, const float* residual, const float* weight, std::size_t n, double eps, float* out) {
  for (std::size_t i = 0; i < n; ++i) x[i] += residual[i];
  rms_norm(x, weight, n, eps, out);
}

void rope(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, RopeLayout layout, int rotary_dim,
          float scale) {
  const int half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;
  // The pair (a, b) of dimension i: split halves pair i with i + d/2, interleaved 2i with 2i + 1 (d: the
  // rotated dimensions).
  const int stride = layout == RopeLayout::SplitHalves ? 1 : 2;
  const int partner = layout == RopeLayout::SplitHalves ? half : 1;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    const float c = std::cos(angle) * scale, s = std::sin(angle) * scale;
    for (int h = 0; h < n_heads; ++h) {
      float* a = x + h * head_dim + i * stride;
      float* b = a + partner;
      const float xa = *a, xb = *b;
      *a = xa * c - xb * s;
      *b = xb * c + xa * s;
    }
  }
}

void silu_mul(const float* gate, const float* up, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_mul(const float* gate, const float* up, std::size_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = gate[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * up[i];
  }
}

void softcap(float* x, std::size_t n, float cap) {
  const float inv = 1.0f / cap;
  for (std::size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void softmax(float* x, std::size_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (std::size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace rf::cpu
