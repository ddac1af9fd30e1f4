#include "backend/cpu/image_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/matmul.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::cpu {

namespace {

// Output pixels a band of conv2d's patches holds: about 4 MiB of patches at 320 channels.
constexpr std::size_t kBandPatchFloats = std::size_t{1} << 20;

float silu(float v) { return v / (1.0f + std::exp(-v)); }
float gelu(float v) { return 0.5f * v * (1.0f + std::erf(v * static_cast<float>(M_SQRT1_2))); }

// The patches of output pixels [first, first + count) of one image: patch p holds, for each input
// channel c and kernel offset (ky, kx) in W's order, the input under it (0 in the padding).
void gather_patches(const ConvShape& s, const float* image, std::size_t first, std::size_t count, float* patches) {
  const int k = s.kernel, out_w = s.out_width();
  const std::size_t patch = static_cast<std::size_t>(s.in_channels) * k * k;
  for (std::size_t p = 0; p < count; ++p) {
    const int oy = static_cast<int>((first + p) / out_w), ox = static_cast<int>((first + p) % out_w);
    float* out = patches + p * patch;
    for (int c = 0; c < s.in_channels; ++c) {
      const float* plane = image + static_cast<std::size_t>(c) * s.height * s.width;
      for (int ky = 0; ky < k; ++ky) {
        const int iy = oy * s.stride - s.padding + ky;
        for (int kx = 0; kx < k; ++kx) {
          const int ix = ox * s.stride - s.padding + kx;
          const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
          *out++ = inside ? plane[static_cast<std::size_t>(iy) * s.width + ix] : 0.0f;
        }
      }
    }
  }
}

}  // namespace

void conv2d(const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y, ThreadPool& pool) {
  const std::size_t patch = static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel;
  if (w.rows != static_cast<std::size_t>(s.out_channels) || w.cols != patch) {
    fail("conv2d: weights of {} x {} for {} output channels of {} x {} x {} patches", w.rows, w.cols, s.out_channels,
         s.in_channels, s.kernel, s.kernel);
  }
  const std::size_t pixels = static_cast<std::size_t>(s.out_height()) * s.out_width();
  const std::size_t band = std::max<std::size_t>(1, std::min(pixels, kBandPatchFloats / patch));
  std::vector<float> patches(band * patch), products(band * s.out_channels);
  for (int n = 0; n < s.batch; ++n) {
    const float* image = x + static_cast<std::size_t>(n) * s.in_channels * s.height * s.width;
    float* out = y + static_cast<std::size_t>(n) * s.out_channels * pixels;
    for (std::size_t first = 0; first < pixels; first += band) {
      const std::size_t count = std::min(band, pixels - first);
      pool.parallel_for(count, 16, [&](std::size_t begin, std::size_t end) {
        gather_patches(s, image, first + begin, end - begin, patches.data() + begin * patch);
      });
      matmul(w, patches.data(), count, products.data(), pool);  // [pixel][out channel]
      for (int c = 0; c < s.out_channels; ++c) {
        const float b = bias ? bias[c] : 0.0f;
        float* plane = out + static_cast<std::size_t>(c) * pixels + first;
        for (std::size_t p = 0; p < count; ++p) plane[p] = products[p * s.out_channels + c] + b;
      }
    }
  }
}

void group_norm(const GroupNormShape& s, const float* x, const float* gamma, const float* beta, float eps, bool silu_after,
                float* y, ThreadPool& pool) {
  if (s.groups <= 0 || s.channels % s.groups != 0) fail("group_norm: {} channels in {} groups", s.channels, s.groups);
  const int per_group = s.channels / s.groups;
  const std::size_t group_size = static_cast<std::size_t>(per_group) * s.spatial;
  pool.parallel_for(static_cast<std::size_t>(s.batch) * s.groups, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t g = begin; g < end; ++g) {
      const float* in = x + g * group_size;
      float* out = y + g * group_size;
      // Two passes in double: the group's values can sit far from zero (mean >> spread).
      double sum = 0;
      for (std::size_t i = 0; i < group_size; ++i) sum += in[i];
      const double mean = sum / group_size;
      double squares = 0;
      for (std::size_t i = 0; i < group_size; ++i) squares += (in[i] - mean) * (in[i] - mean);
      const float inv_std = static_cast<float>(1.0 / std::sqrt(squares / group_size + eps));
      const int first_channel = static_cast<int>(g % s.groups) * per_group;
      for (int c = 0; c < per_group; ++c) {
        const float scale = gamma[first_channel + c] * inv_std;
        const float shift = beta[first_channel + c] - static_cast<float>(mean) * scale;
        for (int i = 0; i < s.spatial; ++i) {
          const float v = in[static_cast<std::size_t>(c) * s.spatial + i] * scale + shift;
          out[static_cast<std::size_t>(c) * s.spatial + i] = silu_after ? silu(v) : v;
        }
      }
    }
  });
}

void layer_norm(const float* x, std::size_t rows, std::size_t n, const float* gamma, const float* beta, float eps,
                float* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    double sum = 0, squares = 0;
    for (std::size_t i = 0; i < n; ++i) sum += in[i];
    const double mean = sum / n;
    for (std::size_t i = 0; i < n; ++i) squares += (in[i] - mean) * (in[i] - mean);
    const float inv_std = static_cast<float>(1.0 / std::sqrt(squares / n + eps));
    for (std::size_t i = 0; i < n; ++i) y[r * n + i] = (in[i] - static_cast<float>(mean)) * inv_std * gamma[i] + beta[i];
  }
}

void geglu(const float* x, std::size_t rows, std::size_t inner, float* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* hidden = x + r * 2 * inner;
    const float* gate = hidden + inner;
    for (std::size_t i = 0; i < inner; ++i) {
      y[r * inner + i] = hidden[i] * gelu(gate[i]);
    }
  }
}

void activation(const float* x, std::size_t n, Activation kind, float* y) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    switch (kind) {
      case Activation::silu: y[i] = silu(v); break;
      case Activation::gelu: y[i] = gelu(v); break;
      case Activation::quick_gelu: y[i] = v / (1.0f + std::exp(-1.702f * v)); break;
    }
  }
}

void upsample_nearest2x(const float* x, std::size_t planes, int height, int width, float* y) {
  const std::size_t out_w = 2 * static_cast<std::size_t>(width);
  for (std::size_t p = 0; p < planes; ++p) {
    const float* in = x + p * height * width;
    float* out = y + p * 4 * height * width;
    for (int r = 0; r < 2 * height; ++r) {
      for (std::size_t c = 0; c < out_w; ++c) out[r * out_w + c] = in[static_cast<std::size_t>(r / 2) * width + c / 2];
    }
  }
}

void timestep_embedding(const float* timesteps, int n, const TimestepEmbedding& how, float* y) {
  const int half = how.dim / 2;
  for (int t = 0; t < n; ++t) {
    float* out = y + static_cast<std::size_t>(t) * how.dim;
    for (int i = 0; i < half; ++i) {
      // diffusers computes the exponent and the angle in fp32.
      const float exponent = -std::log(how.max_period) * static_cast<float>(i) / (half - how.downscale_freq_shift);
      const float angle = timesteps[t] * std::exp(exponent);
      out[how.flip_sin_to_cos ? i : half + i] = std::cos(angle);
      out[how.flip_sin_to_cos ? half + i : i] = std::sin(angle);
    }
    if (how.dim % 2 == 1) out[how.dim - 1] = 0.0f;  // diffusers pads an odd width with a zero
  }
}

void attention(const AttentionShape& s, const float* q, const float* k, const float* v, float scale, float* y,
               ThreadPool& pool) {
  const std::size_t rows = static_cast<std::size_t>(s.batch_heads) * s.queries;
  pool.parallel_for(rows, 4, [&](std::size_t begin, std::size_t end) {
    std::vector<float> scores(s.keys);
    for (std::size_t row = begin; row < end; ++row) {
      const std::size_t head = row / s.queries;
      const float* query = q + row * s.dim;
      const float* keys = k + head * s.keys * s.dim;
      const float* values = v + head * s.keys * s.dim;
      const int seen = s.causal ? static_cast<int>(row % s.queries) + 1 : s.keys;
      float most = -INFINITY;
      for (int j = 0; j < seen; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < s.dim; ++d) dot += query[d] * keys[static_cast<std::size_t>(j) * s.dim + d];
        scores[j] = dot * scale;
        most = std::max(most, scores[j]);
      }
      float total = 0.0f;
      for (int j = 0; j < seen; ++j) total += (scores[j] = std::exp(scores[j] - most));
      float* out = y + row * s.dim;
      std::fill(out, out + s.dim, 0.0f);
      for (int j = 0; j < seen; ++j) {
        const float weight = scores[j] / total;
        for (int d = 0; d < s.dim; ++d) out[d] += weight * values[static_cast<std::size_t>(j) * s.dim + d];
      }
    }
  });
}

// Scores held at once, per band of queries: 64 MiB of fp32.
constexpr std::size_t kMaxScores = std::size_t{16} << 20;

// Rows of scores [rows][keys] (row r is query first + r) become their softmax weights, in place.
void softmax_band(float* scores, int rows, int keys, int first, bool causal, float scale, ThreadPool& pool) {
  pool.parallel_for(static_cast<std::size_t>(rows), 8, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      float* row = scores + r * keys;
      const int seen = causal ? std::min(first + static_cast<int>(r) + 1, keys) : keys;
      float most = -INFINITY;
      for (int j = 0; j < seen; ++j) most = std::max(most, row[j] *= scale);
      float total = 0.0f;
      for (int j = 0; j < seen; ++j) total += (row[j] = std::exp(row[j] - most));
      for (int j = 0; j < seen; ++j) row[j] /= total;
      std::fill(row + seen, row + keys, 0.0f);
    }
  });
}

void attention_by_products(const AttentionShape& s, const float* q, const float* k, const float* v, float scale,
                           float* y, ThreadPool& pool) {
  const auto n = [](int count) { return static_cast<std::size_t>(count); };
  const int band = static_cast<int>(std::clamp<std::size_t>(kMaxScores / n(s.keys), 1, n(s.queries)));
  // Kept between calls: fresh tens of MiB each call would cost more in page faults than the products.
  thread_local std::vector<float> scores, values_t;
  scores.resize(std::max(scores.size(), n(band) * n(s.keys)));
  values_t.resize(std::max(values_t.size(), n(s.keys) * n(s.dim)));
  for (int h = 0; h < s.batch_heads; ++h) {
    const float* keys = k + n(h) * n(s.keys) * n(s.dim);
    const float* values = v + n(h) * n(s.keys) * n(s.dim);
    // P V's weight matrix is V^T: [dim][keys].
    for (int j = 0; j < s.keys; ++j)
      for (int d = 0; d < s.dim; ++d) values_t[n(d) * n(s.keys) + n(j)] = values[n(j) * n(s.dim) + n(d)];
    const WeightMatrix key_rows{DType::F32, n(s.keys), n(s.dim), keys};
    const WeightMatrix value_rows{DType::F32, n(s.dim), n(s.keys), values_t.data()};
    for (int first = 0; first < s.queries; first += band) {
      const int rows = std::min(band, s.queries - first);
      const std::size_t at = (n(h) * n(s.queries) + n(first)) * n(s.dim);
      matmul(key_rows, q + at, n(rows), scores.data(), pool);
      softmax_band(scores.data(), rows, s.keys, first, s.causal, scale, pool);
      matmul(value_rows, scores.data(), n(rows), y + at, pool);
    }
  }
}

}  // namespace rf::cpu
