// Stable Diffusion's CPU operations against torch: tests/fixtures/sd/kernels.safetensors holds each
// case's inputs and torch's float64 output (tools/fixtures/make_sd_kernel_fixtures.py, run on the GPU
// machine), with the case's settings in the file's metadata. Outputs are poisoned with NaN first, so
// an element nobody writes fails the check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/cpu/cpu_test_helpers.h"
#include "backend/cpu/image_ops.h"
#include "formats/safetensors.h"
#include "formats/tensor.h"
#include "util/thread_pool.h"
#include "util/expect_close.h"

namespace rf::cpu {
namespace {

class ImageOps : public ::testing::Test {
 protected:
  ImageOps() : file_(std::string(ROCMFORGE_FIXTURES) + "/sd/kernels.safetensors"), tensors_(file_) {}

  std::vector<float> values(const std::string& name) const {
    const TensorView& t = tensors_.at(name);
    EXPECT_EQ(t.dtype, DType::F32) << name;
    const float* data = static_cast<const float*>(t.data);
    return {data, data + t.elements()};
  }
  std::uint64_t dim(const std::string& name, int i) const { return tensors_.at(name).shape[i]; }
  nlohmann::json settings(const std::string& name) const { return nlohmann::json::parse(file_.metadata().at(name)); }
  static std::vector<float> poisoned(std::size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

  void expect_close(const std::string& what, const std::vector<float>& out, const std::string& reference,
                    double tolerance) const {
    test::expect_close(what, out, values(reference), tolerance);
  }

  ThreadPool pool_{2};
  SafetensorsFile file_;
  TensorSet tensors_;
};

// fp32 sums of a few hundred products against float64: well under 1e-5 of the largest output.
constexpr double kSums = 1e-5;

TEST_F(ImageOps, Conv2dMatchesTorch) {
  for (const std::string name : {"conv3x3", "conv3x3_stride2", "conv1x1", "conv3x3_in4"}) {
    const nlohmann::json how = settings(name);
    const ConvShape shape{static_cast<int>(dim(name + ".x", 0)), static_cast<int>(dim(name + ".x", 1)),
                            static_cast<int>(dim(name + ".x", 2)), static_cast<int>(dim(name + ".x", 3)),
                            static_cast<int>(dim(name + ".weight", 0)), static_cast<int>(dim(name + ".weight", 2)),
                            how.at("stride").get<int>(), how.at("padding").get<int>()};
    const std::vector<float> x = values(name + ".x"), weight = values(name + ".weight"), bias = values(name + ".bias");
    const WeightMatrix w{DType::F32, static_cast<std::size_t>(shape.out_channels),
                         static_cast<std::size_t>(shape.in_channels) * shape.kernel * shape.kernel, weight.data()};
    std::vector<float> y = poisoned(static_cast<std::size_t>(shape.batch) * shape.out_channels * shape.out_height() *
                                    shape.out_width());
    conv2d(shape, x.data(), w, bias.data(), y.data(), pool_);
    expect_close(name, y, name + ".y", kSums);
  }
}

TEST_F(ImageOps, GroupNormMatchesTorch) {
  for (const std::string name : {"group_norm", "group_norm_silu", "group_norm_g8"}) {
    const nlohmann::json how = settings(name);
    const GroupNormShape shape{static_cast<int>(dim(name + ".x", 0)), static_cast<int>(dim(name + ".x", 1)),
                               static_cast<int>(dim(name + ".x", 2) * dim(name + ".x", 3)), how.at("groups").get<int>()};
    const std::vector<float> x = values(name + ".x"), gamma = values(name + ".gamma"), beta = values(name + ".beta");
    std::vector<float> y = poisoned(x.size());
    group_norm(shape, x.data(), gamma.data(), beta.data(), how.at("eps").get<float>(), how.at("silu").get<bool>(),
               y.data(), pool_);
    expect_close(name, y, name + ".y", kSums);
  }
}

TEST_F(ImageOps, LayerNormGegluUpsampleMatchTorch) {
  const std::vector<float> x = values("layer_norm.x"), gamma = values("layer_norm.gamma"), beta = values("layer_norm.beta");
  const std::size_t width = dim("layer_norm.x", 2);
  std::vector<float> y = poisoned(x.size());
  layer_norm(x.data(), x.size() / width, width, gamma.data(), beta.data(), settings("layer_norm").at("eps").get<float>(),
             y.data());
  expect_close("layer_norm", y, "layer_norm.y", kSums);

  const std::vector<float> g = values("geglu.x");
  const std::size_t inner = dim("geglu.x", 2) / 2;
  std::vector<float> gated = poisoned(g.size() / 2);
  geglu(g.data(), g.size() / (2 * inner), inner, gated.data());
  expect_close("geglu", gated, "geglu.y", kSums);

  const std::vector<float> image = values("upsample.x");
  const int height = static_cast<int>(dim("upsample.x", 2)), w = static_cast<int>(dim("upsample.x", 3));
  std::vector<float> up = poisoned(image.size() * 4);
  upsample_nearest2x(image.data(), image.size() / (height * w), height, w, up.data());
  expect_close("upsample_nearest2x", up, "upsample.y", 0.0);
}

TEST_F(ImageOps, TimestepEmbeddingMatchesTorch) {
  const nlohmann::json how = settings("timestep_embedding");
  const std::vector<float> t = values("timestep_embedding.t");
  const TimestepEmbedding embedding{how.at("dim").get<int>(), how.at("flip_sin_to_cos").get<bool>(),
                                    how.at("downscale_freq_shift").get<float>(), how.at("max_period").get<float>()};
  std::vector<float> y = poisoned(t.size() * embedding.dim);
  timestep_embedding(t.data(), static_cast<int>(t.size()), embedding, y.data());
  // The angle at t = 999 is ~1e3 radians: its fp32 rounding (diffusers computes it in fp32 too),
  // 999 * 2^-24 ~ 6e-5, moves sin and cos by as much from the float64 reference.
  expect_close("timestep_embedding", y, "timestep_embedding.y", 1e-4);
}

TEST_F(ImageOps, AttentionMatchesTorch) {
  for (const std::string name : {"attention_self_d40", "attention_cross_d64", "attention_self_d80", "attention_cross_d160"}) {
    const std::vector<float> q = values(name + ".q"), k = values(name + ".k"), v = values(name + ".v");
    const AttentionShape shape{static_cast<int>(dim(name + ".q", 0) * dim(name + ".q", 1)),
                               static_cast<int>(dim(name + ".q", 2)), static_cast<int>(dim(name + ".k", 2)),
                               static_cast<int>(dim(name + ".q", 3))};
    std::vector<float> y = poisoned(q.size());
    attention(shape, q.data(), k.data(), v.data(), settings(name).at("scale").get<float>(), y.data(), pool_);
    expect_close(name, y, name + ".y", kSums);
  }
}

// The backend's path against the plain loop, on fresh inputs: self-attention over more queries than a
// band of scores holds (two bands), cross-attention over 77 text tokens, CLIP's causal attention
// and the VAE's single 512-wide head.
TEST_F(ImageOps, AttentionByProductsMatchesTheLoop) {
  test::Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const AttentionShape s : {AttentionShape{2, 4100, 4100, 40}, AttentionShape{3, 257, 77, 64},
                                 AttentionShape{4, 77, 77, 64, true}, AttentionShape{1, 300, 300, 512}}) {
    const std::size_t q_size = static_cast<std::size_t>(s.batch_heads) * s.queries * s.dim;
    const std::size_t kv_size = static_cast<std::size_t>(s.batch_heads) * s.keys * s.dim;
    std::vector<float> q(q_size), k(kv_size), v(kv_size);
    for (auto* x : {&q, &k, &v}) std::ranges::generate(*x, [&] { return rng.uniform(-2.0f, 2.0f); });
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
    std::vector<float> loop = poisoned(q_size), products = poisoned(q_size);
    attention(s, q.data(), k.data(), v.data(), scale, loop.data(), pool_);
    attention_by_products(s, q.data(), k.data(), v.data(), scale, products.data(), pool_);
    // fp32 both, sums in other orders.
    const std::string what = fmt::format("attention by products {}x{} d{}{}", s.queries, s.keys, s.dim,
                                         s.causal ? " causal" : "");
    test::expect_close(what, products, loop, 1e-5);
  }
}

}  // namespace
}  // namespace rf::cpu
