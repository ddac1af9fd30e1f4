// The GPU's ImageBackend against the CPU's, operation by operation, on fresh random inputs. fp32
// operations agree to rounding; matrix products (linear, conv2d) round their input to fp16 on the GPU
// (cuBLAS with f16 weights), which bounds their error near 2^-11 of the largest value, or to bf16
// where f16 would overflow (2^-9).
#include <memory>

#include "backend/cpu/image_backend.h"
#include "backend/gpu/attention/image_attention.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/image/image_backend.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

constexpr double kExact = 1e-5;     // fp32 on both sides, different summation orders
constexpr double kProducts = 4e-3;  // fp16-rounded inputs to the GPU's matrix products
constexpr double kBf16Products = 8 * kProducts;  // bf16-rounded: 3 bits fewer than fp16's

class ImageBackendOps : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu_ = make_image_backend(ctx());
  }
  void TearDown() override { gpu_.reset(); }

  // The same random tensor on both backends.
  std::pair<Tensor, Tensor> both(std::vector<int> dims, float lo = -1.0f, float hi = 1.0f) {
    const std::vector<float> host = random_floats(Tensor::count(dims), lo, hi);
    return {cpu_.upload(host, dims), gpu_->upload(host, dims)};
  }
  void expect(const std::string& what, const Tensor& cpu, const Tensor& gpu, double tolerance) {
    ASSERT_EQ(cpu.dims(), gpu.dims()) << what;
    expect_close(what, gpu_->download(gpu), cpu_.download(cpu), tolerance);
  }
  // An f16 matrix of random values, and a view of it each backend loads.
  TensorView f16_view(std::vector<std::uint16_t>& storage, std::vector<std::uint64_t> shape) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    const auto values = random_floats(n, -0.5f, 0.5f);
    storage.resize(n);
    for (std::size_t i = 0; i < n; ++i) storage[i] = f32_to_f16(values[i]);
    return make_tensor_view("test", "w", DType::F16, shape, n * 2, storage.data());
  }
  TensorView f32_view(std::vector<float>& storage, std::size_t n) {
    storage = random_floats(n);
    const std::uint64_t shape[] = {n};
    return make_tensor_view("test", "b", DType::F32, shape, n * 4, storage.data());
  }

  ThreadPool pool_{2};
  cpu::CpuImageBackend cpu_{pool_};
  std::unique_ptr<ImageBackend> gpu_;
};

TEST_F(ImageBackendOps, ElementwiseAndLayoutMatchTheCpu) {
  const auto [x_cpu, x_gpu] = both({2, 6, 5, 7});
  const auto [y_cpu, y_gpu] = both({2, 6, 5, 7});
  const auto [v_cpu, v_gpu] = both({2, 6});
  expect("add", cpu_.add(x_cpu, y_cpu), gpu_->add(x_gpu, y_gpu), kExact);
  expect("add_per_channel", cpu_.add_per_channel(x_cpu, v_cpu), gpu_->add_per_channel(x_gpu, v_gpu), kExact);
  for (const Activation a : {Activation::silu, Activation::gelu, Activation::quick_gelu}) {
    expect("activation", cpu_.activation(x_cpu, a), gpu_->activation(x_gpu, a), kExact);
  }
  const auto [g_cpu, g_gpu] = both({2, 5, 12});
  expect("geglu", cpu_.geglu(g_cpu), gpu_->geglu(g_gpu), kExact);
  expect("concat_channels", cpu_.concat_channels(x_cpu, y_cpu), gpu_->concat_channels(x_gpu, y_gpu), 0);
  expect("pad_bottom_right", cpu_.pad_bottom_right(x_cpu), gpu_->pad_bottom_right(x_gpu), 0);
  expect("resize 2x", cpu_.resize_nearest(x_cpu, 10, 14), gpu_->resize_nearest(x_gpu, 10, 14), 0);
  expect("resize 9x13", cpu_.resize_nearest(x_cpu, 9, 13), gpu_->resize_nearest(x_gpu, 9, 13), 0);
  const Tensor tokens_cpu = cpu_.to_tokens(x_cpu), tokens_gpu = gpu_->to_tokens(x_gpu);
  expect("to_tokens", tokens_cpu, tokens_gpu, 0);
  expect("to_image", cpu_.to_image(tokens_cpu, 5, 7), gpu_->to_image(tokens_gpu, 5, 7), 0);
  const std::vector<float> t{1.0f, 501.0f, 999.0f};
  expect("timestep_embedding", cpu_.timestep_embedding(t, 32, true, 0.0f), gpu_->timestep_embedding(t, 32, true, 0.0f),
         kExact);
}

TEST_F(ImageBackendOps, NormsMatchTheCpu) {
  std::vector<float> gamma, beta;
  const TensorView g = f32_view(gamma, 32), b = f32_view(beta, 32);
  const NormWeights cpu_norm{cpu_.vector(g), cpu_.vector(b), 32}, gpu_norm{gpu_->vector(g), gpu_->vector(b), 32};
  const auto [x_cpu, x_gpu] = both({2, 32, 6, 5}, -3.0f, 3.0f);
  expect("group_norm+silu", cpu_.group_norm(x_cpu, cpu_norm, 8, 1e-6f, true), gpu_->group_norm(x_gpu, gpu_norm, 8, 1e-6f, true),
         kExact);
  const auto [s_cpu, s_gpu] = both({2, 9, 32}, -3.0f, 3.0f);
  expect("layer_norm", cpu_.layer_norm(s_cpu, cpu_norm, 1e-5f), gpu_->layer_norm(s_gpu, gpu_norm, 1e-5f), kExact);
}

TEST_F(ImageBackendOps, ProductsMatchTheCpu) {
  std::vector<std::uint16_t> w, c;
  std::vector<float> bias;
  const TensorView wv = f16_view(w, {48, 64}), bv = f32_view(bias, 48);
  const LinearWeights cpu_lin{cpu_.matrix(wv, 48, 64, false), cpu_.vector(bv)};
  const LinearWeights gpu_lin{gpu_->matrix(wv, 48, 64, false), gpu_->vector(bv)};
  const auto [x_cpu, x_gpu] = both({3, 11, 64});
  expect("linear", cpu_.linear(x_cpu, cpu_lin), gpu_->linear(x_gpu, gpu_lin), kProducts);
  // Inputs past f16's largest value (65504), which overflowing products (force_upcast) may take.
  const LinearWeights gpu_wide{gpu_->matrix(wv, 48, 64, true), gpu_lin.bias};
  const auto [big_cpu, big_gpu] = both({3, 11, 64}, -2e5f, 2e5f);
  expect("linear, past f16's range", cpu_.linear(big_cpu, cpu_lin), gpu_->linear(big_gpu, gpu_wide), kBf16Products);

  // 16 channels take the patches' path, 32 the implicit GEMM's where the device has it.
  for (const int channels : {16, 32}) {
    const TensorView cv = f16_view(c, {48, static_cast<std::uint64_t>(channels), 3, 3});
    const ConvWeights cpu_conv = cpu_.conv_weights(cv, cpu_.vector(bv), channels, 3, false);
    const ConvWeights gpu_conv = gpu_->conv_weights(cv, gpu_->vector(bv), channels, 3, false);
    const auto [i_cpu, i_gpu] = both({2, channels, 9, 7});
    const std::string what = fmt::format("conv2d 3x3 of {} channels", channels);
    expect(what, cpu_.conv2d(i_cpu, cpu_conv, 1, 1), gpu_->conv2d(i_gpu, gpu_conv, 1, 1), kProducts);
    expect(what + " /2", cpu_.conv2d(i_cpu, cpu_conv, 2, 1), gpu_->conv2d(i_gpu, gpu_conv, 2, 1), kProducts);
    const ConvWeights gpu_wide = gpu_->conv_weights(cv, gpu_conv.bias, channels, 3, true);
    const auto [big_cpu, big_gpu] = both({2, channels, 9, 7}, -2e5f, 2e5f);
    expect(what + ", past f16's range", cpu_.conv2d(big_cpu, cpu_conv, 1, 1), gpu_->conv2d(big_gpu, gpu_wide, 1, 1),
           kBf16Products);
  }
  std::vector<int> ids{0, 47, 3, 3};
  expect("embed", cpu_.embed(cpu_lin.w, ids), gpu_->embed(gpu_lin.w, ids), 0);
}

TEST_F(ImageBackendOps, AttentionMatchesTheCpu) {
  // Head widths the flash kernel takes (64, 40 x 2 heads), and others (8 causal as tiny CLIPs, the
  // VAE's single 512-wide head) that go through the two products.
  struct Case {
    int batch, queries, keys, heads, d;
    bool causal;
  };
  for (const Case c : {Case{2, 37, 77, 1, 64, false}, Case{1, 50, 50, 2, 40, false}, Case{2, 77, 77, 3, 8, true},
                       Case{1, 96, 96, 1, 512, false}}) {
    const auto [q_cpu, q_gpu] = both({c.batch, c.queries, c.heads * c.d}, -2.0f, 2.0f);
    const auto [k_cpu, k_gpu] = both({c.batch, c.keys, c.heads * c.d}, -2.0f, 2.0f);
    const auto [v_cpu, v_gpu] = both({c.batch, c.keys, c.heads * c.d});
    const std::string what = fmt::format("attention d={} heads={}{}", c.d, c.heads, c.causal ? " causal" : "");
    // The two products run cuBLAS SGEMM with TF32 off: fp32 too. The flash widths take f16 products
    // where the device has the tensor-core kernel (image_attention_test.cpp's tolerance).
    const bool f16_products = !c.causal && image_attention_supports(c.d) && image_attention_mma_available(ctx(), c.d);
    expect(what, cpu_.attention(q_cpu, k_cpu, v_cpu, c.heads, c.causal),
           gpu_->attention(q_gpu, k_gpu, v_gpu, c.heads, c.causal), f16_products ? 1e-3 : 1e-4);
  }
}

// Blocks the pool keeps for one size go back to the device when a tensor of another size would not
// fit beside them.
TEST_F(ImageBackendOps, KeptBlocksMakeRoomForOtherSizes) {
  constexpr int kFloats = 64 << 20;  // 256 MiB
  { const Tensor kept = gpu_->upload(std::vector<float>(kFloats, 1.0f), {kFloats}); }
  std::size_t free_bytes = 0, total_bytes = 0;
  RF_GPU_CHECK(gpuMemGetInfo(&free_bytes, &total_bytes));
  // Half a block free beside the kept one: another size fits only once the kept block is let go.
  const DeviceBuffer<std::uint8_t> filler(free_bytes - std::size_t{kFloats} * sizeof(float) / 2);
  const std::vector<float> other(kFloats - 1024, 2.0f);
  const Tensor placed = gpu_->upload(other, {kFloats - 1024});
  EXPECT_EQ(gpu_->download(placed), other);
}

}  // namespace
}  // namespace rf::gpu::test
