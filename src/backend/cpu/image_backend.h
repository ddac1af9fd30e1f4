#pragma once
// The CPU's ImageBackend: Stable Diffusion's operations over host memory on a thread pool, with
// image_ops.h's kernels and the weights' matrix products (matmul.h). It is the reference the GPU
// backends are checked against, and the fallback where there is no GPU.
#include <deque>
#include <vector>

#include "backend/image_backend.h"

namespace rf {
class ThreadPool;
}

namespace rf::cpu {

class CpuImageBackend final : public ImageBackend {
 public:
  explicit CpuImageBackend(ThreadPool& pool) : pool_(pool) {}

  // The CPU's products always take fp32 inputs: fp16_overflows changes nothing.
  WeightMatrix matrix(const TensorView& view, std::size_t rows, std::size_t cols, bool fp16_overflows) override;
  const float* vector(const TensorView& view) override;
  Tensor upload(std::span<const float> host, std::vector<int> dims) override;
  std::vector<float> download(const Tensor& x) override;

  Tensor conv2d(const Tensor& x, const ConvWeights& w, int stride, int padding) override;
  Tensor pad_bottom_right(const Tensor& x) override;
  Tensor group_norm(const Tensor& x, const NormWeights& norm, int groups, float eps, bool silu) override;
  Tensor layer_norm(const Tensor& x, const NormWeights& norm, float eps) override;
  Tensor linear(const Tensor& x, const LinearWeights& w) override;
  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal) override;
  Tensor activation(const Tensor& x, Activation kind) override;
  Tensor geglu(const Tensor& x) override;
  Tensor add(const Tensor& a, const Tensor& b) override;
  Tensor add_per_channel(const Tensor& x, const Tensor& v) override;
  Tensor concat_channels(const Tensor& a, const Tensor& b) override;
  Tensor resize_nearest(const Tensor& x, int height, int width) override;
  Tensor to_tokens(const Tensor& image) override;
  Tensor to_image(const Tensor& tokens, int height, int width) override;
  Tensor embed(const WeightMatrix& table, std::span<const int> ids) override;
  Tensor timestep_embedding(std::span<const float> timesteps, int dim, bool flip_sin_to_cos,
                            float freq_shift) override;

 private:
  ThreadPool& pool_;
  std::deque<std::vector<float>> vectors_;  // the 1-D parameters as fp32; a deque keeps them in place
};

}  // namespace rf::cpu
