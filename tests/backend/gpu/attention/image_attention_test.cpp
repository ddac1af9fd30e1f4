// Stable Diffusion's attention on the GPU against the CPU's (backend/cpu/image_ops.h, itself checked
// against torch's scaled_dot_product_attention): self-attention over image tokens and cross-attention
// over 77 text tokens, at every head width SD 1.x, 2.x and SDXL use, with counts that leave partial
// query and key tiles; heads side by side in each token's row as the projections leave them.
#include <cmath>

#include "backend/cpu/image_ops.h"
#include "backend/gpu/attention/image_attention.h"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/gpu_test.h"
#include "util/thread_pool.h"

namespace rf::gpu::test {
namespace {

struct Case {
  int batch, heads, queries, keys, dim;
  bool causal = false;
  ImageAttentionShape shape() const { return {batch, heads, queries, keys, dim, causal}; }
  std::string name() const {
    return "d" + std::to_string(dim) + " " + std::to_string(queries) + "x" + std::to_string(keys) +
           (causal ? " causal" : "");
  }
};

const Case kCases[] = {{2, 8, 1024, 1024, 40}, {2, 8, 1024, 77, 40}, {1, 10, 257, 77, 64}, {2, 2, 333, 333, 80},
                       {1, 2, 64, 77, 128},    {2, 2, 100, 100, 160}, {1, 1, 5, 3, 40}};
// CLIP's text attention: 77 tokens (a partial last tile of queries and keys), and a short one.
const Case kCausalCases[] = {{2, 12, 77, 77, 64, true}, {1, 20, 77, 77, 64, true}, {1, 2, 5, 5, 40, true}};

// [batch][tokens][heads * dim] <-> [batch * heads][tokens][dim] (the CPU reference's layout).
std::vector<float> heads_apart(const std::vector<float>& x, int batch, int tokens, int heads, int dim, bool back) {
  std::vector<float> y(x.size());
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < dim; ++d) {
          const std::size_t side_by_side = ((static_cast<std::size_t>(b) * tokens + t) * heads + h) * dim + d;
          const std::size_t apart = ((static_cast<std::size_t>(b) * heads + h) * tokens + t) * dim + d;
          (back ? y[side_by_side] : y[apart]) = back ? x[apart] : x[side_by_side];
        }
  return y;
}

class ImageAttention : public GpuTest {
 protected:
  struct Inputs {
    std::vector<float> q, k, v, reference;
  };
  Inputs inputs(const Case& c) {
    const std::size_t q_size = static_cast<std::size_t>(c.batch) * c.heads * c.queries * c.dim;
    const std::size_t kv_size = static_cast<std::size_t>(c.batch) * c.heads * c.keys * c.dim;
    Inputs in{random_floats(q_size, -2.0f, 2.0f), random_floats(kv_size, -2.0f, 2.0f), random_floats(kv_size), {}};
    std::vector<float> apart(q_size);
    cpu::attention({c.batch * c.heads, c.queries, c.keys, c.dim, c.causal},
                   heads_apart(in.q, c.batch, c.queries, c.heads, c.dim, false).data(),
                   heads_apart(in.k, c.batch, c.keys, c.heads, c.dim, false).data(),
                   heads_apart(in.v, c.batch, c.keys, c.heads, c.dim, false).data(), scale(c), apart.data(), pool_);
    in.reference = heads_apart(apart, c.batch, c.queries, c.heads, c.dim, true);
    return in;
  }
  static float scale(const Case& c) { return 1.0f / std::sqrt(static_cast<float>(c.dim)); }
  void expect_portable_matches(const Case& c) {
    const Inputs in = inputs(c);
    DeviceBuffer<float> q(in.q), k(in.k), v(in.v), y(in.q.size());
    y.poison();
    launch_image_attention(q.data(), k.data(), v.data(), c.shape(), scale(c), y.data(), ctx());
    // fp32 both; __expf's few ulps and another order of sums.
    expect_close("image attention " + c.name(), y.download(), in.reference, 1e-5);
  }
  ThreadPool pool_{2};
};

TEST_F(ImageAttention, MatchesCpu) {
  for (const Case& c : kCases) expect_portable_matches(c);
}

TEST_F(ImageAttention, CausalMatchesCpu) {
  for (const Case& c : kCausalCases) expect_portable_matches(c);
}

TEST_F(ImageAttention, TensorCoresMatchCpu) {
  if (!image_attention_mma_available(ctx(), 40)) GTEST_SKIP() << "no tensor-core attention for this device or build";
  for (const Case& c : kCases) {
    const Inputs in = inputs(c);
    DeviceBuffer<float> q(in.q), k(in.k), v(in.v), y(in.q.size());
    DeviceBuffer<std::uint16_t> k_half(in.k.size()), v_half(in.v.size());
    launch_round_to_16bit(k.data(), in.k.size(), DType::F16, k_half.data(), ctx());
    launch_round_to_16bit(v.data(), in.v.size(), DType::F16, v_half.data(), ctx());
    y.poison();
    launch_image_attention_mma(q.data(), k_half.data(), v_half.data(), c.shape(), scale(c), y.data(), ctx());
    // q, k, v and the softmax weights each rounded to f16 (2^-11 relative) before their products:
    // about 4e-4 of the output's norm.
    expect_close("tensor-core attention " + c.name(), y.download(), in.reference, 1e-3);
  }
}

TEST_F(ImageAttention, RefusesHeadWidthsItLacks) {
  DeviceBuffer<float> buffer(64 * 96);
  EXPECT_FALSE(image_attention_supports(96));
  EXPECT_FALSE(image_attention_mma_available(ctx(), 96));
  EXPECT_THROW(launch_image_attention(buffer.data(), buffer.data(), buffer.data(), {1, 1, 8, 8, 96}, 0.1f,
                                      buffer.data(), ctx()),
               Error);
  EXPECT_THROW(launch_image_attention(buffer.data(), buffer.data(), buffer.data(), {1, 1, 8, 9, 64, true}, 0.1f,
                                      buffer.data(), ctx()),
               Error);
}

}  // namespace
}  // namespace rf::gpu::test
