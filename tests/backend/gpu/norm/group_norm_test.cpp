// Stable Diffusion's norms on the GPU against the CPU's (backend/cpu/image_ops.h), itself checked
// against torch: fp32 both, the sums in other orders.
#include "backend/cpu/image_ops.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/norm/norm.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

class ImageNorms : public GpuTest {};

constexpr double kTolerance = 1e-5;

// The UNet's groups at 64x64 (320 channels of 32 groups), the VAE's eps, a group larger than a block
// pass and a small odd one; values offset from zero, as activations are.
TEST_F(ImageNorms, GroupNormMatchesCpu) {
  ThreadPool pool(2);
  struct Case { int batch, channels, spatial, groups; float eps; bool silu; };
  for (const Case c : {Case{2, 320, 64 * 64, 32, 1e-5f, true}, Case{1, 128, 40 * 24, 32, 1e-6f, false},
                       Case{3, 24, 7 * 5, 8, 1e-5f, true}}) {
    const std::size_t n = static_cast<std::size_t>(c.batch) * c.channels * c.spatial;
    const auto x = random_floats(n, -2.0f, 4.0f), gamma = random_floats(c.channels, 0.5f, 1.5f),
               beta = random_floats(c.channels);
    DeviceBuffer<float> x_gpu(x), gamma_gpu(gamma), beta_gpu(beta), y_gpu(n);
    y_gpu.poison();
    launch_group_norm(x_gpu.data(), c.batch, c.channels, c.spatial, c.groups, gamma_gpu.data(), beta_gpu.data(), c.eps,
                      c.silu, y_gpu.data(), ctx());
    std::vector<float> ref(n);
    cpu::group_norm({c.batch, c.channels, c.spatial, c.groups}, x.data(), gamma.data(), beta.data(), c.eps, c.silu,
                    ref.data(), pool);
    expect_close("group_norm " + std::to_string(c.channels) + "x" + std::to_string(c.spatial), y_gpu.download(), ref,
                 kTolerance);
  }
}

TEST_F(ImageNorms, LayerNormMatchesCpu) {
  for (const int n : {320, 1280, 77}) {
    const int rows = 37;
    const auto x = random_floats(static_cast<std::size_t>(rows) * n, -1.0f, 3.0f), gamma = random_floats(n, 0.5f, 1.5f),
               beta = random_floats(n);
    DeviceBuffer<float> x_gpu(x), gamma_gpu(gamma), beta_gpu(beta), y_gpu(x.size());
    y_gpu.poison();
    launch_layer_norm(x_gpu.data(), rows, n, gamma_gpu.data(), beta_gpu.data(), 1e-5f, y_gpu.data(), ctx());
    std::vector<float> ref(x.size());
    cpu::layer_norm(x.data(), rows, n, gamma.data(), beta.data(), 1e-5f, ref.data());
    expect_close("layer_norm " + std::to_string(n), y_gpu.download(), ref, kTolerance);
  }
}

}  // namespace
}  // namespace rf::gpu::test
