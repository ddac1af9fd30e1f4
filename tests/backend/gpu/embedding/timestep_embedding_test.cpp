// The timestep embedding on the GPU against the CPU's (backend/cpu/image_ops.h), at the UNet's
// settings and SDXL's time ids' (flip off).
#include "backend/cpu/image_ops.h"
#include "backend/gpu/embedding/embedding.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class TimestepEmbedding : public GpuTest {};

TEST_F(TimestepEmbedding, MatchesCpu) {
  const std::vector<float> t = {999.0f, 981.0f, 500.0f, 1.0f, 0.0f, 1024.0f, 768.0f};
  for (const bool flip : {true, false}) {
    for (const int dim : {320, 256, 7}) {
      DeviceBuffer<float> t_gpu(t), y_gpu(t.size() * dim);
      y_gpu.poison();
      launch_timestep_embedding(t_gpu.data(), static_cast<int>(t.size()), dim, flip, 0.0f, 10000.0f, y_gpu.data(), ctx());
      std::vector<float> ref(t.size() * dim);
      cpu::timestep_embedding(t.data(), static_cast<int>(t.size()), {dim, flip, 0.0f, 10000.0f}, ref.data());
      // The device's expf, sinf and cosf against the host's: a few ulps of angles up to ~1e3 radians.
      expect_close("timestep_embedding " + std::to_string(dim), y_gpu.download(), ref, 1e-5);
    }
  }
}

}  // namespace
}  // namespace rf::gpu::test
