#pragma once
// The operations Stable Diffusion's networks (CLIP text encoder, UNet, VAE) are built from, which
// each backend implements over its own memory: models/stable_diffusion writes each network once,
// against this interface, and runs it on the CPU (backend/cpu/image_backend.h) or a GPU.
//
// Activations are fp32 tensors in the backend's memory: images NCHW, token sequences [batch,
// tokens, width], row-major. Weights stay in their stored type (WeightMatrix); the small 1-D
// parameters (biases, norm affines) are fp32 copies the backend owns.
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/activation.h"
#include "backend/conv_shape.h"
#include "formats/tensor.h"
#include "formats/weight_matrix.h"
#include "util/error.h"

namespace rf {

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<float> storage, std::vector<int> dims) : storage_(std::move(storage)), dims_(std::move(dims)) {}

  float* data() const { return storage_.get(); }
  const std::vector<int>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int dim(int i) const { return dims_.at(i < 0 ? dims_.size() + i : i); }
  std::size_t elements() const { return count(dims_); }
  // The same storage seen with other dimensions of the same element count.
  Tensor reshaped(std::vector<int> dims) const {
    if (count(dims) != elements()) fail("reshape of {} elements to {}", elements(), count(dims));
    return {storage_, std::move(dims)};
  }
  static std::size_t count(const std::vector<int>& dims) {
    std::size_t n = 1;
    for (int d : dims) n *= static_cast<std::size_t>(d);
    return n;
  }

 private:
  std::shared_ptr<float> storage_;
  std::vector<int> dims_;
};

// y = x W^T + bias over x's last dimension; `bias` is null or `w.rows` values in backend memory.
struct LinearWeights {
  WeightMatrix w{};
  const float* bias = nullptr;
};

// A square-kernel convolution: `w` is [out_channels] rows of in_channels * kernel * kernel values, in
// PyTorch's (c, ky, kx) order unless `position_major`: (ky, kx, c), the order a GPU backend's implicit
// GEMM takes.
struct ConvWeights {
  WeightMatrix w{};
  const float* bias = nullptr;
  int in_channels = 0;
  int kernel = 1;
  bool position_major = false;
};

// GroupNorm's or LayerNorm's affine: `channels` gammas and betas.
struct NormWeights {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  int channels = 0;
};

class ImageBackend {
 public:
  virtual ~ImageBackend() = default;

  // Parameters, from a checkpoint's views: a matrix of `rows` x `cols`, and a 1-D parameter as fp32;
  // both live as long as the backend. A matrix stays in its stored type (a GPU backend rounds the
  // inputs of its products to that type for its tensor cores), unless `fp16_overflows`: then no
  // product takes f16 inputs, as a VAE whose activations overflow fp16 needs (force_upcast); f16
  // weights become bf16 (fp32's range) or f32, as the backend chooses.
  virtual WeightMatrix matrix(const TensorView& view, std::size_t rows, std::size_t cols, bool fp16_overflows) = 0;
  virtual const float* vector(const TensorView& view) = 0;
  // A convolution's weights, [out, in, kernel, kernel] in `view`, with its bias (from vector()); as
  // matrix() reads them unless the backend keeps them in an order of its own.
  virtual ConvWeights conv_weights(const TensorView& view, const float* bias, int in_channels, int kernel,
                                   bool fp16_overflows) {
    const std::size_t cols = static_cast<std::size_t>(in_channels) * kernel * kernel;
    return {matrix(view, view.elements() / cols, cols, fp16_overflows), bias, in_channels, kernel};
  }

  // Device memory held: the weights and the most activations held at once (a GPU backend's pool
  // keeps what it allocated); 0 where the backend runs in host memory.
  virtual std::size_t device_bytes() const { return 0; }
  // Gives back the device memory kept for reuse that no tensor holds (a server between jobs, so
  // that another process on the device may have it); the weights stay.
  virtual void release_unused_memory() {}

  virtual Tensor upload(std::span<const float> host, std::vector<int> dims) = 0;
  virtual std::vector<float> download(const Tensor& x) = 0;

  virtual Tensor conv2d(const Tensor& x, const ConvWeights& w, int stride, int padding) = 0;
  // Zero padding of one row at the bottom and one column at the right (the VAE encoder's
  // downsampling pads asymmetrically before its stride-2 convolution).
  virtual Tensor pad_bottom_right(const Tensor& x) = 0;
  virtual Tensor group_norm(const Tensor& x, const NormWeights& norm, int groups, float eps, bool silu) = 0;
  virtual Tensor layer_norm(const Tensor& x, const NormWeights& norm, float eps) = 0;
  virtual Tensor linear(const Tensor& x, const LinearWeights& w) = 0;
  // softmax(q k^T / sqrt(d)) v per head: q [batch, queries, heads * d], k and v [batch, keys,
  // heads * d]; with `causal`, query i sees keys up to i (CLIP's text encoder).
  virtual Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal) = 0;
  virtual Tensor activation(const Tensor& x, Activation kind) = 0;
  // [..., 2 * inner] -> [..., inner]: hidden * gelu(gate), the halves as diffusers' GEGLU splits them.
  virtual Tensor geglu(const Tensor& x) = 0;
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  // x [batch, channels, h, w] plus v [batch, channels] broadcast over the pixels.
  virtual Tensor add_per_channel(const Tensor& x, const Tensor& v) = 0;
  virtual Tensor concat_channels(const Tensor& a, const Tensor& b) = 0;
  // Nearest-neighbour resize as torch's F.interpolate(mode="nearest").
  virtual Tensor resize_nearest(const Tensor& x, int height, int width) = 0;
  virtual Tensor to_tokens(const Tensor& image) = 0;                         // NCHW -> [N, HW, C]
  virtual Tensor to_image(const Tensor& tokens, int height, int width) = 0;  // [N, HW, C] -> NCHW
  // Rows `ids` of `table` as fp32: [ids.size(), table.cols].
  virtual Tensor embed(const WeightMatrix& table, std::span<const int> ids) = 0;
  // diffusers' sinusoidal embedding of each timestep: [timesteps.size(), dim].
  virtual Tensor timestep_embedding(std::span<const float> timesteps, int dim, bool flip_sin_to_cos,
                                    float freq_shift) = 0;
};

}  // namespace rf
