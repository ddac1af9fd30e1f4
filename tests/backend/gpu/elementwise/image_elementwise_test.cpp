// GEGLU and nearest upsampling on the GPU against the CPU's (backend/cpu/image_ops.h).
#include "backend/cpu/image_ops.h"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class ImageElementwise : public GpuTest {};

TEST_F(ImageElementwise, GegluMatchesCpu) {
  const std::size_t rows = 2 * 4096, inner = 1280;  // SD 1.5's 64x64 feed-forward, batch 2
  const auto x = random_floats(rows * 2 * inner, -4.0f, 4.0f);
  DeviceBuffer<float> x_gpu(x), y_gpu(rows * inner);
  y_gpu.poison();
  launch_geglu(x_gpu.data(), rows, inner, y_gpu.data(), ctx());
  std::vector<float> ref(rows * inner);
  cpu::geglu(x.data(), rows, inner, ref.data());
  expect_close("geglu", y_gpu.download(), ref, 1e-6);  // erff against std::erf: a few ulps
}

TEST_F(ImageElementwise, UpsampleIsTheCpusExactly) {
  const std::size_t planes = 2 * 640;
  const int height = 17, width = 9;
  const auto x = random_floats(planes * height * width);
  DeviceBuffer<float> x_gpu(x), y_gpu(4 * x.size());
  y_gpu.poison();
  launch_upsample_nearest2x(x_gpu.data(), planes, height, width, y_gpu.data(), ctx());
  std::vector<float> ref(4 * x.size());
  cpu::upsample_nearest2x(x.data(), planes, height, width, ref.data());
  EXPECT_EQ(bits(y_gpu.download()), bits(ref));
}

}  // namespace
}  // namespace rf::gpu::test
