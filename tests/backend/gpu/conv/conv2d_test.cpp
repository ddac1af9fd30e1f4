// conv2d on the GPU against the CPU's (backend/cpu/image_ops.h, itself checked against torch): the
// patches path with f32 weights (SGEMM: fp32 throughout) and f16 weights (the GEMM rounds the patches
// to f16), the implicit GEMM on tensor cores and cuDNN with f16 and bf16 weights (they round the
// patches to the weights' type; cuDNN its output too), and the pixel-major copies around them.
#include "backend/cpu/image_ops.h"
#include "backend/gpu/conv/conv.h"
#include "backend/gpu/gpu_test.h"
#include "formats/tensor.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

// conv_in at 32x24 latents, a downsampling conv, a 1x1 shortcut, one whose output needs two bands of
// patches (8 x 3 x 3 patches of a 512x512 image: the band holds 233k of its 262k pixels), shapes that
// leave partial tiles of the implicit GEMM (channels and pixels not multiples of 128), and few-pixel
// ones whose k the implicit GEMM splits.
const ConvShape kShapes[] = {{2, 4, 32, 24, 32, 3, 1, 1},    {2, 32, 17, 12, 32, 3, 2, 1},
                             {1, 64, 9, 7, 32, 1, 1, 0},     {1, 8, 512, 512, 4, 3, 1, 1},
                             {2, 96, 23, 19, 200, 3, 1, 1},  {1, 128, 16, 16, 136, 1, 1, 0},
                             {2, 320, 16, 16, 320, 3, 1, 1}, {1, 64, 33, 31, 8, 3, 2, 1},
                             {2, 256, 8, 8, 256, 3, 1, 1},   {1, 640, 8, 8, 1280, 1, 1, 0}};

class Conv2d : public GpuTest {
 protected:
  static std::string name(const ConvShape& s) {
    return std::to_string(s.in_channels) + "->" + std::to_string(s.out_channels) + " k" + std::to_string(s.kernel) +
           " s" + std::to_string(s.stride) + " " + std::to_string(s.height) + "x" + std::to_string(s.width);
  }
  std::vector<float> reference(const ConvShape& s, const std::vector<float>& x, const WeightMatrix& w,
                               const std::vector<float>& bias) {
    std::vector<float> ref(static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width());
    cpu::conv2d(s, x.data(), w, bias.data(), ref.data(), pool_);
    return ref;
  }
  // conv2d of 16-bit weights in conv2d_mma_order by `convolve` against the CPU, for every shape and
  // type that order suits.
  using Convolve =
      std::function<void(const ConvShape&, const float* x, const WeightMatrix&, const float* bias, float* y, void*)>;
  void check_position_major(const std::string& what, double f16_tolerance, double bf16_tolerance,
                            const std::function<std::size_t(const ConvShape&, DType)>& workspace_bytes,
                            const Convolve& convolve) {
    for (const ConvShape& s : kShapes) {
      const std::size_t patch = static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel;
      const auto x = random_floats(static_cast<std::size_t>(s.batch) * s.in_channels * s.height * s.width, -2.0f, 2.0f);
      const auto weights = random_floats(s.out_channels * patch, -0.3f, 0.3f), bias = random_floats(s.out_channels);
      for (const DType type : {DType::F16, DType::BF16}) {
        if (!conv2d_mma_order_suits(s.in_channels, s.kernel, type)) continue;
        std::vector<std::uint16_t> stored(weights.size());
        from_f32(type, weights, stored.data());
        DeviceBuffer<float> x_gpu(x), bias_gpu(bias);
        DeviceBuffer<float> y_gpu(static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width());
        DeviceBuffer<std::uint16_t> w_gpu(conv2d_mma_order(stored.data(), s.out_channels, s.in_channels, s.kernel));
        DeviceBuffer<std::uint8_t> workspace(workspace_bytes(s, type));
        const std::size_t rows = s.out_channels;
        y_gpu.poison();
        convolve(s, x_gpu.data(), {type, rows, patch, w_gpu.data()}, bias_gpu.data(), y_gpu.data(), workspace.data());
        expect_close(what + " " + name(s) + (type == DType::F16 ? " f16" : " bf16"), y_gpu.download(),
                     reference(s, x, {type, rows, patch, stored.data()}, bias),
                     type == DType::F16 ? f16_tolerance : bf16_tolerance);
      }
    }
  }
  ThreadPool pool_{2};
};

TEST_F(Conv2d, PatchesMatchCpu) {
  for (const ConvShape& s : kShapes) {
    const std::size_t patch = static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel;
    const auto x = random_floats(static_cast<std::size_t>(s.batch) * s.in_channels * s.height * s.width, -2.0f, 2.0f);
    const auto weights = random_floats(s.out_channels * patch, -0.3f, 0.3f), bias = random_floats(s.out_channels);
    std::vector<std::uint16_t> halves(weights.size());
    for (std::size_t i = 0; i < weights.size(); ++i) halves[i] = f32_to_f16(weights[i]);
    DeviceBuffer<float> x_gpu(x), w32_gpu(weights), bias_gpu(bias);
    DeviceBuffer<float> y_gpu(static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width());
    DeviceBuffer<std::uint16_t> w16_gpu(halves);
    DeviceBuffer<std::uint8_t> workspace(conv2d_patches_workspace_bytes(s));
    for (const DType type : {DType::F32, DType::F16}) {
      const void* host = type == DType::F32 ? static_cast<const void*>(weights.data()) : halves.data();
      const void* device = type == DType::F32 ? static_cast<const void*>(w32_gpu.data()) : w16_gpu.data();
      const std::size_t rows = s.out_channels;
      y_gpu.poison();
      launch_conv2d_by_patches(s, x_gpu.data(), {type, rows, patch, device}, bias_gpu.data(), y_gpu.data(),
                               workspace.data(), ctx());
      // f16 patches: each product moves by up to 2^-11 (4.9e-4) relative, independently, so that a sum
      // of many moves by less (about 1.8e-4 of the output's norm here).
      expect_close("conv2d patches " + name(s) + (type == DType::F32 ? " f32" : " f16"), y_gpu.download(),
                   reference(s, x, {type, rows, patch, host}, bias), type == DType::F32 ? 1e-5 : 5e-4);
    }
  }
}

TEST_F(Conv2d, TensorCoresMatchCpu) {
  if (!conv2d_mma_available(ctx())) GTEST_SKIP() << "no tensor-core convolution for this device or build";
  // Patches rounded to the weights' type: up to 2^-11 (f16) or 2^-8 (bf16) relative a product, fp32
  // sums (as the patches' path: about 1.8e-4 and 1.5e-3 of the output's norm here).
  check_position_major(
      "conv2d tensor cores", 5e-4, 4e-3, [&](const ConvShape& s, DType) { return conv2d_mma_workspace_bytes(s, ctx()); },
      [&](const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y, void* workspace) {
        launch_conv2d_mma(s, x, w, bias, y, workspace, ctx());
      });
}

TEST_F(Conv2d, CudnnMatchesCpu) {
  const auto cudnn = CudnnConvolutions::create(ctx());
  if (!cudnn) GTEST_SKIP() << "this build has no cuDNN";
  // As the tensor cores' products, and the output rounded once to the weights' type before the bias:
  // up to half an ulp (2^-11, 2^-8) relative, about 0.3 of it in norm, so 3.3e-4 and 2.7e-3 together.
  check_position_major(
      "conv2d cuDNN", 7e-4, 6e-3, [&](const ConvShape& s, DType type) { return cudnn->workspace_bytes(s, type); },
      [&](const ConvShape& s, const float* x, const WeightMatrix& w, const float* bias, float* y, void* workspace) {
        cudnn->run(s, x, w, bias, y, workspace);
      });
}

TEST_F(Conv2d, PixelMajorCopiesRoundTrip) {
  const int batch = 2, channels = 45, pixels = 37;  // partial 32 x 32 tiles both ways
  const auto x = random_floats(static_cast<std::size_t>(batch) * channels * pixels, -3.0f, 3.0f);
  const auto bias = random_floats(channels);
  for (const DType type : {DType::F16, DType::BF16}) {
    DeviceBuffer<float> x_gpu(x), bias_gpu(bias), y_gpu(x.size());
    DeviceBuffer<std::uint16_t> pixel_major(x.size());
    y_gpu.poison();
    launch_to_pixel_major(x_gpu.data(), batch, channels, pixels, type, pixel_major.data(), ctx());
    launch_from_pixel_major(pixel_major.data(), batch, channels, pixels, type, bias_gpu.data(), y_gpu.data(), ctx());
    std::vector<std::uint16_t> rounded(x.size());
    from_f32(type, x, rounded.data());
    std::vector<float> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float value = type == DType::F16 ? f16_to_f32(rounded[i]) : bf16_to_f32(rounded[i]);
      expected[i] = value + bias[i / pixels % channels];
    }
    EXPECT_EQ(bits(y_gpu.download()), bits(expected)) << dtype_name(type);
  }
}

TEST_F(Conv2d, RefusesMismatchedWeights) {
  const ConvShape s{1, 4, 8, 8, 8, 3, 1, 1};
  DeviceBuffer<float> x(4 * 64), w(8 * 4 * 9), y(8 * 64);
  const WeightMatrix wrong{DType::F32, 8, 4 * 3, w.data()};
  DeviceBuffer<std::uint8_t> workspace(conv2d_patches_workspace_bytes(s));
  EXPECT_THROW(launch_conv2d_by_patches(s, x.data(), wrong, nullptr, y.data(), workspace.data(), ctx()), Error);
  EXPECT_THROW(launch_conv2d_mma(s, x.data(), wrong, nullptr, y.data(), workspace.data(), ctx()), Error);
}

}  // namespace
}  // namespace rf::gpu::test
