#include "models/stable_diffusion/memory_estimate.h"

#include <algorithm>

#include "util/error.h"

namespace rf::stable_diffusion {

namespace {

// An ImageBackend whose tensors have dimensions and no data: each operation makes its output's shape
// and counts its bytes while the tensor lives. Weights are counted as the GPU backend stores them.
class DryRunBackend final : public ImageBackend {
 public:
  WeightMatrix matrix(const TensorView& view, std::size_t rows, std::size_t cols, bool) override {
    weights_ += rows * cols * (view.dtype == DType::F32 ? sizeof(float) : sizeof(std::uint16_t));
    return {view.dtype, rows, cols, view.data};
  }
  const float* vector(const TensorView& view) override {
    weights_ += view.elements() * sizeof(float);
    return static_cast<const float*>(view.data);
  }
  std::size_t device_bytes() const override { return weights_ + peak_; }
  std::size_t weight_bytes() const { return weights_; }
  std::size_t peak_activation_bytes() const { return peak_; }

  Tensor upload(std::span<const float>, std::vector<int> dims) override { return make(std::move(dims)); }
  std::vector<float> download(const Tensor& x) override { return std::vector<float>(x.elements(), 0.0f); }

  Tensor conv2d(const Tensor& x, const ConvWeights& w, int stride, int padding) override {
    const auto out = [&](int size) { return (size + 2 * padding - w.kernel) / stride + 1; };
    return make({x.dim(0), static_cast<int>(w.w.rows), out(x.dim(2)), out(x.dim(3))});
  }
  Tensor pad_bottom_right(const Tensor& x) override { return make({x.dim(0), x.dim(1), x.dim(2) + 1, x.dim(3) + 1}); }
  Tensor group_norm(const Tensor& x, const NormWeights&, int, float, bool) override { return make(x.dims()); }
  Tensor layer_norm(const Tensor& x, const NormWeights&, float) override { return make(x.dims()); }
  Tensor linear(const Tensor& x, const LinearWeights& w) override { return with_last(x, static_cast<int>(w.w.rows)); }
  Tensor attention(const Tensor& q, const Tensor&, const Tensor&, int, bool) override { return make(q.dims()); }
  Tensor activation(const Tensor& x, Activation) override { return make(x.dims()); }
  Tensor geglu(const Tensor& x) override { return with_last(x, x.dim(-1) / 2); }
  Tensor add(const Tensor& a, const Tensor&) override { return make(a.dims()); }
  Tensor add_per_channel(const Tensor& x, const Tensor&) override { return make(x.dims()); }
  Tensor concat_channels(const Tensor& a, const Tensor& b) override {
    return make({a.dim(0), a.dim(1) + b.dim(1), a.dim(2), a.dim(3)});
  }
  Tensor resize_nearest(const Tensor& x, int height, int width) override {
    return make({x.dim(0), x.dim(1), height, width});
  }
  Tensor to_tokens(const Tensor& image) override {
    return make({image.dim(0), image.dim(2) * image.dim(3), image.dim(1)});
  }
  Tensor to_image(const Tensor& tokens, int height, int width) override {
    return make({tokens.dim(0), tokens.dim(2), height, width});
  }
  Tensor embed(const WeightMatrix& table, std::span<const int> ids) override {
    return make({static_cast<int>(ids.size()), static_cast<int>(table.cols)});
  }
  Tensor timestep_embedding(std::span<const float> timesteps, int dim, bool, float) override {
    return make({static_cast<int>(timesteps.size()), dim});
  }

 private:
  Tensor with_last(const Tensor& x, int last) {
    std::vector<int> dims = x.dims();
    dims.back() = last;
    return make(std::move(dims));
  }
  // No memory behind it: the deleter only takes the bytes off the count.
  Tensor make(std::vector<int> dims) {
    const std::size_t bytes = Tensor::count(dims) * sizeof(float);
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return {std::shared_ptr<float>(nullptr, [this, bytes](float*) { live_ -= bytes; }), std::move(dims)};
  }

  std::size_t weights_ = 0, live_ = 0, peak_ = 0;
};

}  // namespace

MemoryEstimate estimate_memory(const PipelineParts& parts, GenerationOptions options) {
  DryRunBackend backend;
  MemoryEstimate estimate;
  {
    const Pipeline pipeline(parts, backend);
    estimate.weights = backend.weight_bytes();
    pipeline.generate(pipeline.resolve(options));
  }
  estimate.activations = backend.peak_activation_bytes();
  return estimate;
}

}  // namespace rf::stable_diffusion
