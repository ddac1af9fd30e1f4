#include <cmath>
#include <numeric>

#include "backend/cpu/ops.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/rope/rope.h"
#include "backend/gpu/gpu_test.h"
#include "util/half.h"

namespace rf::gpu::test {
namespace {

class RopeKv : public GpuTest {};

constexpr double kQTolerance = 1e-5;      // fp32, sin/cos within an ulp or two of the CPU's
constexpr double kCacheTolerance = 1e-3;  // f16 cache: rounding to 11 significant bits (2^-11 = 4.9e-4)

ModelConfig rope_config(int head_dim, bool llama3) {
  ModelConfig c;
  c.head_dim = head_dim;
  c.rope_theta = llama3 ? 500000.0 : 10000.0;
  if (llama3) c.rope_scaling = {RopeScaling::Kind::Llama3, 8.0, 1.0, 4.0, 8192.0};
  return c;
}

TEST_F(RopeKv, RotatesQAndAppendsToPagedCache) {
  constexpr int kBlockSize = 16, kBlocks = 40, kSlots = kBlockSize * kBlocks;
  const HeadShape shapes[] = {{8, 8, 64}, {32, 8, 128}, {28, 4, 96}, {14, 2, 80}};
  for (const auto& shape : shapes) {
    for (const RopeLayout layout : {RopeLayout::SplitHalves, RopeLayout::Interleaved}) {
      const bool llama3 = shape.head_dim == 128 || shape.head_dim == 64;
      const auto inv_freq = rope_inv_freq(rope_config(shape.head_dim, llama3));
      const int n_tokens = 7;
      const int q_dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
      const auto q = random_floats(n_tokens * q_dim, -2.0f, 2.0f);
      const auto k = random_floats(n_tokens * kv_dim, -2.0f, 2.0f);
      const auto v = random_floats(n_tokens * kv_dim, -2.0f, 2.0f);
      // Distinct random slots scattered over the cache's blocks, at positions up to 32k.
      std::vector<std::int32_t> slots(kSlots);
      std::iota(slots.begin(), slots.end(), 0);
      for (int i = 0; i < n_tokens; ++i) std::swap(slots[i], slots[random_int(i, kSlots - 1)]);
      slots.resize(n_tokens);
      std::vector<std::int32_t> positions(n_tokens);
      for (auto& p : positions) p = random_int(0, 32767);
      positions[0] = 0;

      DeviceBuffer<float> q_gpu(q), k_gpu(k), v_gpu(v), inv_freq_gpu(inv_freq);
      DeviceBuffer<std::int32_t> positions_gpu(positions), slots_gpu(slots);
      DeviceBuffer<std::uint16_t> keys(static_cast<std::size_t>(kSlots) * kv_dim), values(keys.size());
      keys.poison();
      values.poison();
      launch_rope_kv_append(q_gpu.data(), k_gpu.data(), v_gpu.data(), positions_gpu.data(), slots_gpu.data(), n_tokens,
                            shape, inv_freq_gpu.data(), layout, {keys.data(), values.data()}, ctx());
      synchronize();

      auto q_ref = q, k_ref = k;
      std::vector<float> keys_out, values_out, keys_ref, values_ref;
      const auto keys_host = keys.download(), values_host = values.download();
      for (int t = 0; t < n_tokens; ++t) {
        cpu::rope(&q_ref[t * q_dim], shape.n_heads, shape.head_dim, positions[t], inv_freq.data(), layout);
        cpu::rope(&k_ref[t * kv_dim], shape.n_kv_heads, shape.head_dim, positions[t], inv_freq.data(), layout);
        for (int j = 0; j < kv_dim; ++j) {
          const std::size_t cached = static_cast<std::size_t>(slots[t]) * kv_dim + j;
          keys_out.push_back(f16_to_f32(keys_host[cached]));
          values_out.push_back(f16_to_f32(values_host[cached]));
          keys_ref.push_back(k_ref[t * kv_dim + j]);
          values_ref.push_back(v[t * kv_dim + j]);
        }
      }
      const std::string name = std::string(layout == RopeLayout::SplitHalves ? "neox " : "normal ") +
                               std::to_string(shape.n_heads) + "/" + std::to_string(shape.n_kv_heads) + "x" +
                               std::to_string(shape.head_dim) + (llama3 ? " llama3" : "");
      expect_close("rope " + name + " q", q_gpu.download(), q_ref, kQTolerance);
      expect_close("rope " + name + " cached k", keys_out, keys_ref, kCacheTolerance);
      expect_close("rope " + name + " cached v", values_out, values_ref, kCacheTolerance);

      // Every other slot is untouched: still the poison pattern.
      std::size_t written = 0;
      for (std::size_t i = 0; i < keys_host.size(); ++i) written += (keys_host[i] != 0xFFFF) + (values_host[i] != 0xFFFF);
      EXPECT_EQ(written, 2u * n_tokens * kv_dim) << name << ": writes outside the tokens' slots";
    }
  }
}

}  // namespace
}  // namespace rf::gpu::test
