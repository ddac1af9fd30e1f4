// Stable Diffusion's norms on the GPU against the CPU's (backend/cpu/image_ops.h), itself checked
// against torch: fp32 both, the sums in other orders.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/image_ops.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/norm/norm.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

constexpr double kTolerance = 1e-5;
// For values far from zero beside their spread, the CPU's float x * scale + shift and any float mean
// round to steps no longer small beside the spread; a mean and spread taken as sums of the values and
// of their squares would be much further off.
constexpr double kOffsetTolerance = 3e-4;

struct GroupNormCase {
  int batch, channels, spatial, groups;
  float eps;
  bool silu;
  float lo = -2.0f, hi = 4.0f;  // the values' range
  double tolerance = kTolerance;
};

class ImageNorms : public GpuTest {
 protected:
  // Runs case c on the GPU, into a buffer of its own or over x, and compares with the CPU's.
  void check_group_norm(const GroupNormCase& c, bool in_place);
};

void ImageNorms::check_group_norm(const GroupNormCase& c, bool in_place) {
  const std::size_t n = static_cast<std::size_t>(c.batch) * c.channels * c.spatial;
  const auto x = random_floats(n, c.lo, c.hi), gamma = random_floats(c.channels, 0.5f, 1.5f),
             beta = random_floats(c.channels);
  DeviceBuffer<float> x_gpu(x), gamma_gpu(gamma), beta_gpu(beta), y_gpu(in_place ? 0 : n);
  DeviceBuffer<std::uint8_t> workspace(group_norm_workspace_bytes(c.batch, c.channels, c.spatial, c.groups));
  y_gpu.poison();
  DeviceBuffer<float>& y = in_place ? x_gpu : y_gpu;
  launch_group_norm(x_gpu.data(), c.batch, c.channels, c.spatial, c.groups, gamma_gpu.data(), beta_gpu.data(), c.eps,
                    c.silu, y.data(), workspace.data(), ctx());
  ThreadPool pool(2);
  std::vector<float> ref(n);
  cpu::group_norm({c.batch, c.channels, c.spatial, c.groups}, x.data(), gamma.data(), beta.data(), c.eps, c.silu,
                  ref.data(), pool);
  expect_close("group_norm " + std::to_string(c.batch) + "x" + std::to_string(c.channels) + "x" +
                   std::to_string(c.spatial) + (in_place ? " in place" : ""),
               y.download(), ref, c.tolerance);
}

// The UNet's groups at 64x64 (320 channels of 32 groups), the VAE's eps, a group of many chunks, small
// odd ones (the path without float4s), and values far from zero beside their spread.
TEST_F(ImageNorms, GroupNormMatchesCpu) {
  using Case = GroupNormCase;
  for (const Case c : {Case{2, 320, 64 * 64, 32, 1e-5f, true}, Case{1, 128, 40 * 24, 32, 1e-6f, false},
                       Case{3, 24, 7 * 5, 8, 1e-5f, true}, Case{1, 64, 256 * 256, 8, 1e-5f, false},
                       Case{2, 32, 7 * 9, 4, 1e-5f, true},
                       Case{1, 64, 64 * 64, 8, 1e-5f, false, 999.0f, 1001.0f, kOffsetTolerance}}) {
    check_group_norm(c, false);
  }
}

// y may alias x: the statistics are complete before any value is written.
TEST_F(ImageNorms, GroupNormInPlace) { check_group_norm({2, 64, 128 * 128, 32, 1e-5f, true}, true); }

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
