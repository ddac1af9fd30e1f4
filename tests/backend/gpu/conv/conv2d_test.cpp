// conv2d on the GPU against the CPU's (backend/cpu/image_ops.h, itself checked against torch), with
// f32 weights (SGEMM: fp32 throughout) and f16 weights (the GEMM rounds the patches to f16).
#include "backend/cpu/image_ops.h"
#include "backend/gpu/conv/conv.h"
#include "backend/gpu/gpu_test.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

class Conv2d : public GpuTest {};

TEST_F(Conv2d, MatchesCpu) {
  ThreadPool pool(2);
  // conv_in at 32x24 latents, a downsampling conv, a 1x1 shortcut, and one whose output needs two
  // bands of patches (8 x 3 x 3 patches of a 512x512 image: the band holds 233k of its 262k pixels).
  for (const ConvShape s : {ConvShape{2, 4, 32, 24, 32, 3, 1, 1}, ConvShape{2, 32, 17, 12, 32, 3, 2, 1},
                            ConvShape{1, 64, 9, 7, 32, 1, 1, 0}, ConvShape{1, 8, 512, 512, 4, 3, 1, 1}}) {
    const std::size_t patch = static_cast<std::size_t>(s.in_channels) * s.kernel * s.kernel;
    const std::size_t out_size = static_cast<std::size_t>(s.batch) * s.out_channels * s.out_height() * s.out_width();
    const auto x = random_floats(static_cast<std::size_t>(s.batch) * s.in_channels * s.height * s.width, -2.0f, 2.0f);
    const auto weights = random_floats(s.out_channels * patch, -0.3f, 0.3f), bias = random_floats(s.out_channels);
    std::vector<std::uint16_t> halves(weights.size());
    for (std::size_t i = 0; i < weights.size(); ++i) halves[i] = f32_to_f16(weights[i]);
    DeviceBuffer<float> x_gpu(x), w32_gpu(weights), bias_gpu(bias), y_gpu(out_size);
    DeviceBuffer<std::uint16_t> w16_gpu(halves);
    DeviceBuffer<std::uint8_t> workspace(conv2d_workspace_bytes(s));
    const std::string name = std::to_string(s.in_channels) + "->" + std::to_string(s.out_channels) + " k" +
                             std::to_string(s.kernel) + " s" + std::to_string(s.stride) + " " +
                             std::to_string(s.height) + "x" + std::to_string(s.width);
    for (const DType type : {DType::F32, DType::F16}) {
      const void* host = type == DType::F32 ? static_cast<const void*>(weights.data()) : halves.data();
      const void* device = type == DType::F32 ? static_cast<const void*>(w32_gpu.data()) : w16_gpu.data();
      y_gpu.poison();
      launch_conv2d(s, x_gpu.data(), {type, static_cast<std::size_t>(s.out_channels), patch, device}, bias_gpu.data(),
                    y_gpu.data(), workspace.data(), ctx());
      std::vector<float> ref(out_size);
      cpu::conv2d(s, x.data(), {type, static_cast<std::size_t>(s.out_channels), patch, host}, bias.data(),
                  ref.data(), pool);
      // f16 patches: each product moves by up to 2^-11 relative; sums of up to 576 of them.
      expect_close("conv2d " + name + (type == DType::F32 ? " f32" : " f16"), y_gpu.download(), ref,
                   type == DType::F32 ? 1e-5 : 2e-3);
    }
  }
}

TEST_F(Conv2d, RefusesMismatchedWeights) {
  const ConvShape s{1, 4, 8, 8, 8, 3, 1, 1};
  DeviceBuffer<float> x(4 * 64), w(8 * 4 * 9), y(8 * 64);
  DeviceBuffer<std::uint8_t> workspace(conv2d_workspace_bytes(s));
  EXPECT_THROW(launch_conv2d(s, x.data(), {DType::F32, 8, 4 * 3, w.data()}, nullptr, y.data(), workspace.data(), ctx()),
               Error);
}

}  // namespace
}  // namespace rf::gpu::test
