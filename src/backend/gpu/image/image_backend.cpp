#include "backend/gpu/image/image_backend.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <string_view>
#include <tuple>

#include "backend/gpu/attention/attention.h"
#include "backend/gpu/attention/image_attention.h"
#include "backend/gpu/conv/conv.h"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/embedding/embedding.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/event_timer.h"
#include "util/caching_allocator.h"
#include "util/error.h"

namespace rf::gpu {

namespace {

// Device memory for activations, cut from segments the device gives once (util/caching_allocator.h).
// Tensors hold it alive, so one may outlive the backend.
std::shared_ptr<CachingAllocator> make_activation_memory(const DeviceContext& ctx) {
  return std::make_shared<CachingAllocator>(CachingAllocator::Source{
      [](std::size_t bytes) { return DeviceMemory::try_allocate(bytes); },
      [](void* p) { DeviceMemory::release(p); },
      [&ctx] { ctx.synchronize(); }});
}

// Which of cuDNN and the implicit GEMM convolves 16-bit weights in position-major order: whichever
// ran the shape faster the first time it came (as PyTorch's cudnn.benchmark chooses algorithms), or
// one of them throughout by ROCMFORGE_CUDNN=0 (the implicit GEMM) or 1 (cuDNN), there to compare.
enum class ConvChoice { measured, implicit_gemm, cudnn };
ConvChoice conv_choice() {
  const char* setting = std::getenv("ROCMFORGE_CUDNN");
  if (setting == nullptr) return ConvChoice::measured;
  if (std::string_view(setting) == "0") return ConvChoice::implicit_gemm;
  if (std::string_view(setting) == "1") return ConvChoice::cudnn;
  fail("ROCMFORGE_CUDNN is \"{}\"; set it to 0 (the implicit GEMM) or 1 (cuDNN), or leave it unset", setting);
}

// cuDNN where the build has it and the choice allows; where it cannot start (a broken or mismatched
// install), the implicit GEMM serves, with a notice, unless ROCMFORGE_CUDNN=1 asked for cuDNN.
std::unique_ptr<CudnnConvolutions> start_cudnn(ConvChoice choice, const DeviceContext& ctx) {
  if (choice == ConvChoice::implicit_gemm) return nullptr;
  try {
    return CudnnConvolutions::create(ctx);
  } catch (const Error& e) {
    if (choice == ConvChoice::cudnn) throw;
    fmt::print(stderr, "rocmforge: cuDNN could not start ({}); convolutions run on the implicit GEMM\n", e.what());
    return nullptr;
  }
}

std::size_t planes(const Tensor& x) { return static_cast<std::size_t>(x.dim(0)) * x.dim(1); }

void expect_rank(const Tensor& x, int rank, const char* op) {
  if (x.rank() != rank) fail("{}: a tensor of rank {} where {} was expected", op, x.rank(), rank);
}

class GpuImageBackend final : public ImageBackend {
 public:
  GpuImageBackend(const DeviceContext& ctx, ProductInputs products) : ctx_(ctx), products_(products) {}
  GpuImageBackend(std::unique_ptr<DeviceContext> owned, ProductInputs products)
      : owned_(std::move(owned)), ctx_(*owned_), products_(products) {}
  ~GpuImageBackend() override { (void)gpuStreamSynchronize(ctx_.stream()); }

  WeightMatrix matrix(const TensorView& view, std::size_t rows, std::size_t cols, bool fp16_overflows) override {
    if (is_quantized(view.dtype) || is_auxiliary(view.dtype)) {
      fail("tensor {} is {}; the GPU backend takes Stable Diffusion weights in f32, f16 or bf16", view.name,
           dtype_name(view.dtype));
    }
    if (view.elements() != rows * cols) {
      fail("tensor {} has shape {}, expected {} x {} values", view.name, view.shape_string(), rows, cols);
    }
    const DType type = product_type(view.dtype, fp16_overflows);
    if (type == view.dtype) return keep({type, rows, cols, view.data});
    // f32 weights: launch_gemm then multiplies fp32 inputs unrounded (cuBLAS SGEMM, no TF32).
    const std::vector<float> values = to_f32(view.name, view);
    if (type == DType::F32) return keep({type, rows, cols, values.data()});
    return keep({type, rows, cols, as_bf16(values).data()});
  }

  // 16-bit weights that the implicit GEMM can take go to the device in its order.
  ConvWeights conv_weights(const TensorView& view, const float* bias, int in_channels, int kernel,
                           bool fp16_overflows) override {
    const DType type = product_type(view.dtype, fp16_overflows);
    const bool position_major_suits = cudnn_ || conv2d_mma_available(ctx_);
    if (type == DType::F32 || !position_major_suits || !conv2d_mma_order_suits(in_channels, kernel, type)) {
      return ImageBackend::conv_weights(view, bias, in_channels, kernel, fp16_overflows);
    }
    const std::size_t cols = static_cast<std::size_t>(in_channels) * kernel * kernel, rows = view.elements() / cols;
    std::vector<std::uint16_t> converted;
    const auto* stored = static_cast<const std::uint16_t*>(view.data);
    if (type != view.dtype) stored = (converted = as_bf16(to_f32(view.name, view))).data();
    const std::vector<std::uint16_t> ordered = conv2d_mma_order(stored, static_cast<int>(rows), in_channels, kernel);
    return {keep({type, rows, cols, ordered.data()}), bias, in_channels, kernel, true};
  }

  std::size_t device_bytes() const override {
    std::size_t bytes = memory_->peak_held();
    for (const auto& w : weights_) bytes += w.bytes();
    for (const auto& v : vectors_) bytes += v.bytes();
    return bytes;
  }

  void release_unused_memory() override { memory_->release_free_segments(); }

  const float* vector(const TensorView& view) override {
    return vectors_.emplace_back(to_f32(view.name, view)).data();
  }

  Tensor upload(std::span<const float> host, std::vector<int> dims) override {
    Tensor t = make(std::move(dims));
    if (host.size() != t.elements()) fail("upload of {} values into a tensor of {}", host.size(), t.elements());
    RF_GPU_CHECK(gpuMemcpyAsync(t.data(), host.data(), host.size_bytes(), gpuMemcpyHostToDevice, ctx_.stream()));
    ctx_.synchronize();  // `host` may go as soon as this returns
    return t;
  }

  std::vector<float> download(const Tensor& x) override {
    std::vector<float> host(x.elements());
    RF_GPU_CHECK(gpuMemcpyAsync(host.data(), x.data(), host.size() * sizeof(float), gpuMemcpyDeviceToHost, ctx_.stream()));
    ctx_.synchronize();
    return host;
  }

  Tensor conv2d(const Tensor& x, const ConvWeights& w, int stride, int padding) override {
    expect_rank(x, 4, "conv2d");
    if (x.dim(1) != w.in_channels) fail("conv2d: {} input channels where the weights take {}", x.dim(1), w.in_channels);
    const ConvShape shape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), static_cast<int>(w.w.rows), w.kernel, stride, padding};
    Tensor y = make({shape.batch, shape.out_channels, shape.out_height(), shape.out_width()});
    if (w.position_major) {
      convolve_position_major(shape, x.data(), w, y.data());
    } else {
      const Tensor workspace = scratch(conv2d_patches_workspace_bytes(shape));
      launch_conv2d_by_patches(shape, x.data(), w.w, w.bias, y.data(), workspace.data(), ctx_);
    }
    return y;
  }

  Tensor pad_bottom_right(const Tensor& x) override {
    expect_rank(x, 4, "pad_bottom_right");
    Tensor y = make({x.dim(0), x.dim(1), x.dim(2) + 1, x.dim(3) + 1});
    launch_pad_bottom_right(x.data(), planes(x), x.dim(2), x.dim(3), y.data(), ctx_);
    return y;
  }

  Tensor group_norm(const Tensor& x, const NormWeights& norm, int groups, float eps, bool silu) override {
    expect_rank(x, 4, "group_norm");
    Tensor y = make(x.dims());
    const int spatial = x.dim(2) * x.dim(3);
    const Tensor workspace = scratch(group_norm_workspace_bytes(x.dim(0), x.dim(1), spatial, groups));
    launch_group_norm(x.data(), x.dim(0), x.dim(1), spatial, groups, norm.gamma, norm.beta, eps, silu, y.data(),
                      workspace.data(), ctx_);
    return y;
  }

  Tensor layer_norm(const Tensor& x, const NormWeights& norm, float eps) override {
    Tensor y = make(x.dims());
    const int n = x.dim(-1);
    launch_layer_norm(x.data(), static_cast<int>(x.elements() / n), n, norm.gamma, norm.beta, eps, y.data(), ctx_);
    return y;
  }

  Tensor linear(const Tensor& x, const LinearWeights& w) override {
    if (static_cast<std::size_t>(x.dim(-1)) != w.w.cols) {
      fail("linear: input width {} where the weights take {}", x.dim(-1), w.w.cols);
    }
    std::vector<int> dims = x.dims();
    dims.back() = static_cast<int>(w.w.rows);
    Tensor y = make(std::move(dims));
    const int rows = static_cast<int>(x.elements() / w.w.cols);
    launch_gemm(ctx_, w.w, x.data(), rows, y.data());
    if (w.bias) launch_add_bias(y.data(), w.bias, rows, static_cast<int>(w.w.rows), ctx_);
    return y;
  }

  Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, bool causal) override {
    expect_rank(q, 3, "attention");
    const ImageAttentionShape shape{q.dim(0), heads, q.dim(1), k.dim(1), q.dim(2) / heads, causal};
    const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    Tensor y = make(q.dims());
    if (!image_attention_supports(shape.head_dim)) {
      attention_by_products(q, k, v, shape, scale, y);
    } else if (!causal && products_ == ProductInputs::weight_type &&
               image_attention_mma_available(ctx_, shape.head_dim)) {
      const Tensor k_half = half_copy(k), v_half = half_copy(v);
      launch_image_attention_mma(q.data(), half_bits(k_half), half_bits(v_half), shape, scale, y.data(), ctx_);
    } else {
      launch_image_attention(q.data(), k.data(), v.data(), shape, scale, y.data(), ctx_);
    }
    return y;
  }

  Tensor activation(const Tensor& x, Activation kind) override {
    Tensor y = make(x.dims());
    launch_activation(x.data(), x.elements(), kind, y.data(), ctx_);
    return y;
  }

  Tensor geglu(const Tensor& x) override {
    if (x.dim(-1) % 2) fail("geglu: an odd width {} cannot split into hidden and gate halves", x.dim(-1));
    std::vector<int> dims = x.dims();
    dims.back() /= 2;
    Tensor y = make(dims);
    launch_geglu(x.data(), x.elements() / (2 * dims.back()), dims.back(), y.data(), ctx_);
    return y;
  }

  Tensor add(const Tensor& a, const Tensor& b) override {
    if (a.dims() != b.dims()) fail("add: tensors of different shapes");
    Tensor y = make(a.dims());
    launch_add(a.data(), b.data(), a.elements(), y.data(), ctx_);
    return y;
  }

  Tensor add_per_channel(const Tensor& x, const Tensor& v) override {
    expect_rank(x, 4, "add_per_channel");
    Tensor y = make(x.dims());
    launch_add_per_plane(x.data(), v.data(), planes(x), x.elements() / planes(x), y.data(), ctx_);
    return y;
  }

  Tensor concat_channels(const Tensor& a, const Tensor& b) override {
    expect_rank(a, 4, "concat_channels");
    Tensor y = make({a.dim(0), a.dim(1) + b.dim(1), a.dim(2), a.dim(3)});
    const std::size_t a_bytes = a.elements() / a.dim(0) * sizeof(float), b_bytes = b.elements() / b.dim(0) * sizeof(float);
    auto* out = reinterpret_cast<std::uint8_t*>(y.data());
    const auto* a_in = reinterpret_cast<const std::uint8_t*>(a.data());
    const auto* b_in = reinterpret_cast<const std::uint8_t*>(b.data());
    for (int n = 0; n < a.dim(0); ++n) {
      std::uint8_t* image = out + n * (a_bytes + b_bytes);
      RF_GPU_CHECK(gpuMemcpyAsync(image, a_in + n * a_bytes, a_bytes, gpuMemcpyDeviceToDevice, ctx_.stream()));
      RF_GPU_CHECK(gpuMemcpyAsync(image + a_bytes, b_in + n * b_bytes, b_bytes, gpuMemcpyDeviceToDevice, ctx_.stream()));
    }
    return y;
  }

  Tensor resize_nearest(const Tensor& x, int height, int width) override {
    expect_rank(x, 4, "resize_nearest");
    Tensor y = make({x.dim(0), x.dim(1), height, width});
    if (height == 2 * x.dim(2) && width == 2 * x.dim(3)) {
      launch_upsample_nearest2x(x.data(), planes(x), x.dim(2), x.dim(3), y.data(), ctx_);
    } else {
      launch_resize_nearest(x.data(), planes(x), x.dim(2), x.dim(3), height, width, y.data(), ctx_);
    }
    return y;
  }

  Tensor to_tokens(const Tensor& image) override {
    expect_rank(image, 4, "to_tokens");
    const int n = image.dim(0), c = image.dim(1), hw = image.dim(2) * image.dim(3);
    Tensor y = make({n, hw, c});
    launch_transpose(image.data(), n, c, hw, 1, y.data(), ctx_);
    return y;
  }

  Tensor to_image(const Tensor& tokens, int height, int width) override {
    expect_rank(tokens, 3, "to_image");
    const int n = tokens.dim(0), c = tokens.dim(2);
    if (tokens.dim(1) != height * width) fail("to_image: {} tokens for a {}x{} image", tokens.dim(1), width, height);
    Tensor y = make({n, c, height, width});
    launch_transpose(tokens.data(), n, height * width, c, 1, y.data(), ctx_);
    return y;
  }

  Tensor embed(const WeightMatrix& table, std::span<const int> ids) override {
    std::vector<std::int32_t> tokens(ids.begin(), ids.end());
    for (const std::int32_t id : tokens) {
      if (id < 0 || static_cast<std::size_t>(id) >= table.rows) fail("token id {} outside the embedding table", id);
    }
    const DeviceBuffer<std::int32_t> device_ids(tokens);
    Tensor y = make({static_cast<int>(ids.size()), static_cast<int>(table.cols)});
    launch_embedding(table, device_ids.data(), static_cast<int>(ids.size()), y.data(), ctx_);
    ctx_.synchronize();  // device_ids goes at the end of this scope
    return y;
  }

  Tensor timestep_embedding(std::span<const float> timesteps, int dim, bool flip_sin_to_cos, float freq_shift) override {
    const Tensor t = upload(timesteps, {static_cast<int>(timesteps.size())});
    Tensor y = make({static_cast<int>(timesteps.size()), dim});
    launch_timestep_embedding(t.data(), static_cast<int>(timesteps.size()), dim, flip_sin_to_cos, freq_shift, 10000.0f,
                              y.data(), ctx_);
    return y;
  }

 private:
  // Head widths the flash kernels lack, as the VAE's single 512-wide head: the kernels take
  // [batch * heads][tokens][d].
  void attention_by_products(const Tensor& q, const Tensor& k, const Tensor& v, const ImageAttentionShape& shape,
                             float scale, Tensor& y) {
    const auto apart = [&](const Tensor& x, int tokens) {
      if (shape.heads == 1) return x;
      Tensor t = make(x.dims());
      launch_transpose(x.data(), shape.batch, tokens, shape.heads, shape.head_dim, t.data(), ctx_);
      return t;
    };
    const Tensor qh = apart(q, shape.queries), kh = apart(k, shape.keys), vh = apart(v, shape.keys);
    Tensor yh = shape.heads == 1 ? y : make(y.dims());
    const Tensor workspace = scratch(attention_by_products_bytes(shape.queries, shape.keys, shape.head_dim));
    launch_attention_by_products(qh.data(), kh.data(), vh.data(), shape.batch * shape.heads, shape.queries, shape.keys,
                                 shape.head_dim, scale, shape.causal, yh.data(), workspace.data(), ctx_);
    if (shape.heads > 1) launch_transpose(yh.data(), shape.batch, shape.heads, shape.queries, shape.head_dim, y.data(), ctx_);
  }

  // x rounded to f16, two values to a float of the returned tensor's storage.
  Tensor half_copy(const Tensor& x) {
    Tensor copy = scratch(x.elements() * sizeof(std::uint16_t));
    launch_round_to_16bit(x.data(), x.elements(), DType::F16, half_bits(copy), ctx_);
    return copy;
  }
  static std::uint16_t* half_bits(const Tensor& copy) { return reinterpret_cast<std::uint16_t*>(copy.data()); }

  // The type a matrix's products take: the stored one, but bf16 (fp32's range) for f16 weights whose
  // products would overflow f16, and f32 throughout in the fp32 mode.
  DType product_type(DType stored, bool fp16_overflows) const {
    if (products_ == ProductInputs::fp32 || stored == DType::F32) return DType::F32;
    return fp16_overflows && stored == DType::F16 ? DType::BF16 : stored;
  }
  static std::vector<std::uint16_t> as_bf16(const std::vector<float>& values) {
    std::vector<std::uint16_t> bits(values.size());
    from_f32(DType::BF16, values, bits.data());
    return bits;
  }
  // A device copy of `w`, whose data is in host memory.
  WeightMatrix keep(const WeightMatrix& w) {
    const auto* bytes = static_cast<const std::uint8_t*>(w.data);
    return {w.dtype, w.rows, w.cols, weights_.emplace_back(bytes, w.bytes()).data()};
  }

  Tensor make(std::vector<int> dims) {
    auto* p = static_cast<float*>(memory_->allocate(Tensor::count(dims) * sizeof(float)));
    return {std::shared_ptr<float>(p, [memory = memory_](float* q) { memory->free(q); }), std::move(dims)};
  }
  void convolve_position_major(const ConvShape& s, const float* x, const ConvWeights& w, float* y) {
    const auto on_cudnn = [&] {
      const Tensor workspace = scratch(cudnn_->workspace_bytes(s, w.w.dtype));
      cudnn_->run(s, x, w.w, w.bias, y, workspace.data());
    };
    const auto on_implicit_gemm = [&] {
      const Tensor workspace = scratch(conv2d_mma_workspace_bytes(s, ctx_));
      launch_conv2d_mma(s, x, w.w, w.bias, y, workspace.data(), ctx_);
    };
    if (!cudnn_) return on_implicit_gemm();
    if (conv_choice_ == ConvChoice::cudnn || !conv2d_mma_available(ctx_)) return on_cudnn();
    const auto key =
        std::tuple(s.batch, s.in_channels, s.height, s.width, s.out_channels, s.kernel, s.stride, s.padding, w.w.dtype);
    auto [choice, fresh] = cudnn_faster_.try_emplace(key, false);
    if (fresh) {
      try {
        choice->second = median_ms(ctx_, 3, 3, on_cudnn) < median_ms(ctx_, 3, 3, on_implicit_gemm);
      } catch (const Error& e) {  // a shape this cuDNN cannot run: the implicit GEMM can
        fmt::print(stderr, "rocmforge: {}; this convolution runs on the implicit GEMM\n", e.what());
        choice->second = false;
      }
    }
    // After the timing, y holds the other path's output: each shape's output comes from its choice.
    if (choice->second) return on_cudnn();
    on_implicit_gemm();
  }

  // At least `bytes` of device scratch, for as long as the returned tensor lives.
  Tensor scratch(std::size_t bytes) { return make({static_cast<int>((bytes + sizeof(float) - 1) / sizeof(float))}); }

  std::unique_ptr<DeviceContext> owned_;  // a context of its own, or none
  const DeviceContext& ctx_;
  ProductInputs products_;
  std::shared_ptr<CachingAllocator> memory_ = make_activation_memory(ctx_);
  ConvChoice conv_choice_ = conv_choice();
  std::unique_ptr<CudnnConvolutions> cudnn_ = start_cudnn(conv_choice_, ctx_);
  std::map<std::tuple<int, int, int, int, int, int, int, int, DType>, bool> cudnn_faster_;  // by shape and type
  std::deque<DeviceBuffer<std::uint8_t>> weights_;
  std::deque<DeviceBuffer<float>> vectors_;
};

}  // namespace

std::unique_ptr<ImageBackend> make_image_backend(const DeviceContext& ctx, ProductInputs products) {
  return std::make_unique<GpuImageBackend>(ctx, products);
}

std::unique_ptr<ImageBackend> make_image_backend(int device, ProductInputs products) {
  return std::make_unique<GpuImageBackend>(std::make_unique<DeviceContext>(device), products);
}

}  // namespace rf::gpu
