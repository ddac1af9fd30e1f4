#include "backend/cpu/image_backend.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/image_ops.h"
#include "backend/cpu/matmul.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::cpu {

namespace {

Tensor host_tensor(std::vector<int> dims) {
  const std::size_t n = Tensor::count(dims);
  return {std::shared_ptr<float>(new float[n], std::default_delete<float[]>()), std::move(dims)};
}

void expect_rank(const Tensor& x, int rank, const char* op) {
  if (x.rank() != rank) fail("{}: a tensor of rank {} where {} was expected", op, x.rank(), rank);
}

// [batch, tokens, heads * d] -> [batch * heads, tokens, d] (the layout the attention kernel takes),
// or back with `split` false.
void move_heads(const float* x, int batch, int tokens, int heads, int d, float* y, bool split) {
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h) {
        const std::size_t merged = ((static_cast<std::size_t>(b) * tokens + t) * heads + h) * d;
        const std::size_t apart = ((static_cast<std::size_t>(b) * heads + h) * tokens + t) * d;
        std::copy_n(x + (split ? merged : apart), d, y + (split ? apart : merged));
      }
}

}  // namespace

WeightMatrix CpuImageBackend::matrix(const TensorView& view, std::size_t rows, std::size_t cols, bool) {
  if (is_auxiliary(view.dtype)) fail("tensor {} is {}, not a weight type", view.name, dtype_name(view.dtype));
  if (view.elements() != rows * cols || (is_quantized(view.dtype) && view.row_elements() != cols)) {
    fail("tensor {} has shape {}, expected {} x {} values", view.name, view.shape_string(), rows, cols);
  }
  return {view.dtype, rows, cols, view.data};
}

const float* CpuImageBackend::vector(const TensorView& view) {
  return vectors_.emplace_back(to_f32(view.name, view)).data();
}

Tensor CpuImageBackend::upload(std::span<const float> host, std::vector<int> dims) {
  Tensor t = host_tensor(std::move(dims));
  if (host.size() != t.elements()) fail("upload of {} values into a tensor of {}", host.size(), t.elements());
  std::ranges::copy(host, t.data());
  return t;
}

std::vector<float> CpuImageBackend::download(const Tensor& x) { return {x.data(), x.data() + x.elements()}; }

Tensor CpuImageBackend::conv2d(const Tensor& x, const ConvWeights& w, int stride, int padding) {
  expect_rank(x, 4, "conv2d");
  if (x.dim(1) != w.in_channels) fail("conv2d: {} input channels where the weights take {}", x.dim(1), w.in_channels);
  const ConvShape shape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), static_cast<int>(w.w.rows), w.kernel, stride, padding};
  Tensor y = host_tensor({shape.batch, shape.out_channels, shape.out_height(), shape.out_width()});
  cpu::conv2d(shape, x.data(), w.w, w.bias, y.data(), pool_);
  return y;
}

Tensor CpuImageBackend::pad_bottom_right(const Tensor& x) {
  expect_rank(x, 4, "pad_bottom_right");
  const int h = x.dim(2), w = x.dim(3);
  Tensor y = host_tensor({x.dim(0), x.dim(1), h + 1, w + 1});
  std::fill_n(y.data(), y.elements(), 0.0f);
  const std::size_t planes = static_cast<std::size_t>(x.dim(0)) * x.dim(1);
  for (std::size_t p = 0; p < planes; ++p)
    for (int r = 0; r < h; ++r) std::copy_n(x.data() + (p * h + r) * w, w, y.data() + (p * (h + 1) + r) * (w + 1));
  return y;
}

Tensor CpuImageBackend::group_norm(const Tensor& x, const NormWeights& norm, int groups, float eps, bool silu) {
  expect_rank(x, 4, "group_norm");
  Tensor y = host_tensor(x.dims());
  const GroupNormShape shape{x.dim(0), x.dim(1), x.dim(2) * x.dim(3), groups};
  cpu::group_norm(shape, x.data(), norm.gamma, norm.beta, eps, silu, y.data(), pool_);
  return y;
}

Tensor CpuImageBackend::layer_norm(const Tensor& x, const NormWeights& norm, float eps) {
  Tensor y = host_tensor(x.dims());
  const std::size_t n = x.dim(-1), rows = x.elements() / n;
  pool_.parallel_for(rows, 16, [&](std::size_t begin, std::size_t end) {
    cpu::layer_norm(x.data() + begin * n, end - begin, n, norm.gamma, norm.beta, eps, y.data() + begin * n);
  });
  return y;
}

Tensor CpuImageBackend::linear(const Tensor& x, const LinearWeights& w) {
  if (static_cast<std::size_t>(x.dim(-1)) != w.w.cols) fail("linear: input width {} where the weights take {}", x.dim(-1), w.w.cols);
  std::vector<int> dims = x.dims();
  dims.back() = static_cast<int>(w.w.rows);
  Tensor y = host_tensor(dims);
  const std::size_t rows = x.elements() / w.w.cols;
  cpu::matmul(w.w, x.data(), rows, y.data(), pool_);
  if (w.bias) {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < w.w.rows; ++c) y.data()[r * w.w.rows + c] += w.bias[c];
  }
  return y;
}

Tensor CpuImageBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal) {
  expect_rank(q, 3, "attention");
  const int batch = q.dim(0), queries = q.dim(1), keys = k.dim(1), d = q.dim(2) / heads;
  const AttentionShape shape{batch * heads, queries, keys, d, causal};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor y = host_tensor(q.dims());
  if (heads == 1) {
    cpu::attention_by_products(shape, q.data(), k.data(), v.data(), scale, y.data(), pool_);
    return y;
  }
  std::vector<float> qh(q.elements()), kh(k.elements()), vh(v.elements()), yh(q.elements());
  move_heads(q.data(), batch, queries, heads, d, qh.data(), true);
  move_heads(k.data(), batch, keys, heads, d, kh.data(), true);
  move_heads(v.data(), batch, keys, heads, d, vh.data(), true);
  cpu::attention_by_products(shape, qh.data(), kh.data(), vh.data(), scale, yh.data(), pool_);
  move_heads(yh.data(), batch, queries, heads, d, y.data(), false);
  return y;
}

Tensor CpuImageBackend::activation(const Tensor& x, Activation kind) {
  Tensor y = host_tensor(x.dims());
  pool_.parallel_for(x.elements(), 1 << 14, [&](std::size_t begin, std::size_t end) {
    cpu::activation(x.data() + begin, end - begin, kind, y.data() + begin);
  });
  return y;
}

Tensor CpuImageBackend::geglu(const Tensor& x) {
  if (x.dim(-1) % 2) fail("geglu: an odd width {} cannot split into hidden and gate halves", x.dim(-1));
  std::vector<int> dims = x.dims();
  dims.back() /= 2;
  Tensor y = host_tensor(dims);
  const std::size_t inner = dims.back(), rows = x.elements() / (2 * inner);
  pool_.parallel_for(rows, 16, [&](std::size_t begin, std::size_t end) {
    cpu::geglu(x.data() + begin * 2 * inner, end - begin, inner, y.data() + begin * inner);
  });
  return y;
}

Tensor CpuImageBackend::add(const Tensor& a, const Tensor& b) {
  if (a.dims() != b.dims()) fail("add: tensors of different shapes");
  Tensor y = host_tensor(a.dims());
  std::transform(a.data(), a.data() + a.elements(), b.data(), y.data(), std::plus<>());
  return y;
}

Tensor CpuImageBackend::add_per_channel(const Tensor& x, const Tensor& v) {
  expect_rank(x, 4, "add_per_channel");
  Tensor y = host_tensor(x.dims());
  const std::size_t planes = static_cast<std::size_t>(x.dim(0)) * x.dim(1), pixels = x.elements() / planes;
  for (std::size_t p = 0; p < planes; ++p) {
    const float* in = x.data() + p * pixels;
    std::transform(in, in + pixels, y.data() + p * pixels, [add = v.data()[p]](float value) { return value + add; });
  }
  return y;
}

Tensor CpuImageBackend::concat_channels(const Tensor& a, const Tensor& b) {
  expect_rank(a, 4, "concat_channels");
  Tensor y = host_tensor({a.dim(0), a.dim(1) + b.dim(1), a.dim(2), a.dim(3)});
  const std::size_t a_image = a.elements() / a.dim(0), b_image = b.elements() / b.dim(0);
  for (int n = 0; n < a.dim(0); ++n) {
    float* out = y.data() + n * (a_image + b_image);
    std::copy_n(a.data() + n * a_image, a_image, out);
    std::copy_n(b.data() + n * b_image, b_image, out + a_image);
  }
  return y;
}

Tensor CpuImageBackend::resize_nearest(const Tensor& x, int height, int width) {
  expect_rank(x, 4, "resize_nearest");
  const int in_h = x.dim(2), in_w = x.dim(3);
  Tensor y = host_tensor({x.dim(0), x.dim(1), height, width});
  const std::size_t planes = static_cast<std::size_t>(x.dim(0)) * x.dim(1);
  if (height == 2 * in_h && width == 2 * in_w) {
    cpu::upsample_nearest2x(x.data(), planes, in_h, in_w, y.data());
    return y;
  }
  // torch's nearest: source index floor(i * in / out) with the scale in float.
  const float scale_y = static_cast<float>(in_h) / height, scale_x = static_cast<float>(in_w) / width;
  for (std::size_t p = 0; p < planes; ++p)
    for (int r = 0; r < height; ++r)
      for (int c = 0; c < width; ++c) {
        const int sy = std::min(static_cast<int>(r * scale_y), in_h - 1), sx = std::min(static_cast<int>(c * scale_x), in_w - 1);
        y.data()[(p * height + r) * width + c] = x.data()[(p * in_h + sy) * in_w + sx];
      }
  return y;
}

Tensor CpuImageBackend::to_tokens(const Tensor& image) {
  expect_rank(image, 4, "to_tokens");
  const int n = image.dim(0), c = image.dim(1), hw = image.dim(2) * image.dim(3);
  Tensor y = host_tensor({n, hw, c});
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int i = 0; i < hw; ++i)
        y.data()[(static_cast<std::size_t>(b) * hw + i) * c + ch] = image.data()[(static_cast<std::size_t>(b) * c + ch) * hw + i];
  return y;
}

Tensor CpuImageBackend::to_image(const Tensor& tokens, int height, int width) {
  expect_rank(tokens, 3, "to_image");
  const int n = tokens.dim(0), c = tokens.dim(2), hw = height * width;
  if (tokens.dim(1) != hw) fail("to_image: {} tokens for a {}x{} image", tokens.dim(1), width, height);
  Tensor y = host_tensor({n, c, height, width});
  for (int b = 0; b < n; ++b)
    for (int i = 0; i < hw; ++i)
      for (int ch = 0; ch < c; ++ch)
        y.data()[(static_cast<std::size_t>(b) * c + ch) * hw + i] = tokens.data()[(static_cast<std::size_t>(b) * hw + i) * c + ch];
  return y;
}

Tensor CpuImageBackend::embed(const WeightMatrix& table, std::span<const int> ids) {
  const int width = static_cast<int>(table.cols);
  Tensor y = host_tensor({static_cast<int>(ids.size()), width});
  const TensorView view{"embedding", table.dtype, 1, {table.cols}, row_bytes(table.dtype, table.cols), nullptr};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= table.rows) fail("token id {} outside the embedding table", ids[i]);
    TensorView row = view;
    row.data = static_cast<const std::byte*>(table.data) + ids[i] * view.bytes;
    std::ranges::copy(to_f32("embedding", row), y.data() + i * width);
  }
  return y;
}

Tensor CpuImageBackend::timestep_embedding(std::span<const float> timesteps, int dim, bool flip_sin_to_cos,
                                           float freq_shift) {
  Tensor y = host_tensor({static_cast<int>(timesteps.size()), dim});
  cpu::timestep_embedding(timesteps.data(), static_cast<int>(timesteps.size()), {dim, flip_sin_to_cos, freq_shift},
                          y.data());
  return y;
}

}  // namespace rf::cpu
