// Stable Diffusion's attention on the GPU against the CPU's (backend/cpu/image_ops.h, itself checked
// against torch's scaled_dot_product_attention): self-attention over image tokens and cross-attention
// over 77 text tokens, at every head width SD 1.x, 2.x and SDXL use, with counts that leave partial
// query and key tiles.
#include <cmath>

#include "backend/cpu/image_ops.h"
#include "backend/gpu/attention/attention.h"
#include "backend/gpu/gpu_test.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

class ImageAttention : public GpuTest {};

TEST_F(ImageAttention, MatchesCpu) {
  ThreadPool pool(2);
  struct Case { int batch_heads, queries, keys, dim; };
  for (const Case c : {Case{16, 1024, 1024, 40}, Case{16, 1024, 77, 40}, Case{10, 257, 77, 64}, Case{4, 333, 333, 80},
                       Case{2, 64, 77, 128}, Case{4, 100, 100, 160}}) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
    const std::size_t q_size = static_cast<std::size_t>(c.batch_heads) * c.queries * c.dim;
    const std::size_t kv_size = static_cast<std::size_t>(c.batch_heads) * c.keys * c.dim;
    const auto q = random_floats(q_size, -2.0f, 2.0f), k = random_floats(kv_size, -2.0f, 2.0f), v = random_floats(kv_size);
    DeviceBuffer<float> q_gpu(q), k_gpu(k), v_gpu(v), y_gpu(q_size);
    y_gpu.poison();
    launch_image_attention(q_gpu.data(), k_gpu.data(), v_gpu.data(), c.batch_heads, c.queries, c.keys, c.dim, scale,
                           y_gpu.data(), ctx());
    std::vector<float> ref(q_size);
    cpu::attention({c.batch_heads, c.queries, c.keys, c.dim}, q.data(), k.data(), v.data(), scale, ref.data(), pool);
    // fp32 both; __expf's few ulps and another order of sums.
    expect_close("image attention d" + std::to_string(c.dim) + " " + std::to_string(c.queries) + "x" +
                     std::to_string(c.keys),
                 y_gpu.download(), ref, 1e-5);
  }
}

TEST_F(ImageAttention, RefusesHeadWidthsItLacks) {
  DeviceBuffer<float> buffer(64 * 96);
  EXPECT_FALSE(image_attention_supports(96));
  EXPECT_THROW(launch_image_attention(buffer.data(), buffer.data(), buffer.data(), 1, 8, 8, 96, 0.1f, buffer.data(), ctx()),
               Error);
}

}  // namespace
}  // namespace rf::gpu::test
