// Each 16-bit convolution path on Stable Diffusion's shapes: the implicit GEMM against cuDNN (where
// the build has it), median microseconds and TFLOP/s. The image backend picks between them per shape
// by timing them the same way; these rows show where each wins.
#include <cstdio>

#include "backend/gpu/conv/conv.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/runtime/event_timer.h"
#include "formats/tensor.h"

namespace rf::gpu::test {
namespace {

class Conv2dBenchmark : public GpuTest {};

struct NamedShape {
  const char* where;
  ConvShape shape;
};

// SD 1.5's UNet at 512x512 (64x64 latents) for one image with CFG (batch 2) and four (batch 8), SDXL's
// at 1024x1024 (batch 2), and the VAE decoders' largest layers (batch 1).
const NamedShape kShapes[] = {
    {"sd15 unet b2", {2, 320, 64, 64, 320, 3, 1, 1}},     {"sd15 unet b2", {2, 640, 64, 64, 320, 3, 1, 1}},
    {"sd15 unet b2", {2, 320, 64, 64, 320, 1, 1, 0}},     {"sd15 unet b2", {2, 320, 64, 64, 320, 3, 2, 1}},
    {"sd15 unet b2", {2, 640, 32, 32, 640, 3, 1, 1}},     {"sd15 unet b2", {2, 1280, 16, 16, 1280, 3, 1, 1}},
    {"sd15 unet b2", {2, 1280, 8, 8, 1280, 3, 1, 1}},     {"sd15 unet b2", {2, 2560, 8, 8, 1280, 3, 1, 1}},
    {"sd15 unet b8", {8, 320, 64, 64, 320, 3, 1, 1}},     {"sd15 unet b8", {8, 640, 32, 32, 640, 3, 1, 1}},
    {"sd15 unet b8", {8, 1280, 16, 16, 1280, 3, 1, 1}},   {"sd15 unet b8", {8, 1280, 8, 8, 1280, 3, 1, 1}},
    {"sd15 unet b8", {8, 320, 64, 64, 320, 1, 1, 0}},     {"sd15 unet b8", {8, 320, 64, 64, 320, 3, 2, 1}},
    {"sd15 unet b8", {8, 2560, 8, 8, 1280, 3, 1, 1}},     {"sd15 unet b8", {8, 1920, 16, 16, 1280, 3, 1, 1}},
    {"sdxl unet b2", {2, 320, 128, 128, 320, 3, 1, 1}},   {"sdxl unet b2", {2, 640, 64, 64, 640, 3, 1, 1}},
    {"sdxl unet b2", {2, 1280, 32, 32, 1280, 3, 1, 1}},   {"vae 512", {1, 512, 128, 128, 512, 3, 1, 1}},
    {"vae 512", {1, 256, 512, 512, 256, 3, 1, 1}},        {"vae 512", {1, 128, 512, 512, 128, 3, 1, 1}},
    {"vae 1024", {1, 512, 256, 256, 512, 3, 1, 1}},       {"vae 1024", {1, 128, 1024, 1024, 128, 3, 1, 1}},
};

TEST_F(Conv2dBenchmark, DISABLED_ImplicitGemmAgainstCudnn) {
  if (!conv2d_mma_available(ctx())) GTEST_SKIP() << "no tensor-core convolution for this device or build";
  const auto cudnn = CudnnConvolutions::create(ctx());
  for (const auto& [where, s] : kShapes) {
    const std::size_t patch = static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel;
    const std::size_t out = static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width();
    const double flop = 2.0 * out * patch;
    DeviceBuffer<float> x(random_floats(static_cast<std::size_t>(s.batch) * s.in_channels * s.height * s.width));
    DeviceBuffer<float> bias(random_floats(s.out_channels)), y(out);
    std::vector<std::uint16_t> stored(s.out_channels * patch);
    from_f32(DType::F16, random_floats(stored.size(), -0.1f, 0.1f), stored.data());
    DeviceBuffer<std::uint16_t> w_gpu(conv2d_mma_order(stored.data(), s.out_channels, s.in_channels, s.kernel));
    const WeightMatrix w{DType::F16, static_cast<std::size_t>(s.out_channels), patch, w_gpu.data()};
    DeviceBuffer<std::uint8_t> mma_workspace(conv2d_mma_workspace_bytes(s, ctx()));
    const float mma_ms = median_ms(ctx(), 5, 3, [&] {
      launch_conv2d_mma(s, x.data(), w, bias.data(), y.data(), mma_workspace.data(), ctx());
    });
    std::printf("[  bench   ] conv %-12s %4d->%-4d k%d s%d %4dx%-4d b%d  implicit GEMM %8.1f us %5.0f TFLOP/s", where,
                s.in_channels, s.out_channels, s.kernel, s.stride, s.height, s.width, s.batch, mma_ms * 1e3,
                flop / mma_ms / 1e9);
    if (cudnn) {
      DeviceBuffer<std::uint8_t> cudnn_workspace(cudnn->workspace_bytes(s, DType::F16));
      const float cudnn_ms = median_ms(ctx(), 5, 3, [&] {
        cudnn->run(s, x.data(), w, bias.data(), y.data(), cudnn_workspace.data());
      });
      std::printf("  cuDNN %8.1f us %5.0f TFLOP/s (%.2fx)", cudnn_ms * 1e3, flop / cudnn_ms / 1e9, mma_ms / cudnn_ms);
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace rf::gpu::test
