#include "backend/cpu/ops.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/attention/kv_cache.h"
#include "backend/gpu/gpu_test.h"
#include "util/half.h"

namespace rf::gpu::test {
namespace {

class RmsNorm : public GpuTest {};

// fp32 throughout; only the order of the sum of squares differs from the CPU's.
constexpr double kTolerance = 1e-5;

// Rows of every path: not whole vectors (1, 5, 777), in registers at 256 threads (1024) and at 1024
// threads with 1, 2 and 4 vectors each (4096, 5120, 8200), and past the registers (16400).
TEST_F(RmsNorm, FusedResidualAddMatchesCpu) {
  constexpr float kEps = 1e-5f;
  for (const int n : {1, 5, 777, 1024, 4096, 5120, 8200, 16400}) {
    for (const bool with_residual : {false, true}) {
      const int rows = 3;
      const auto x = random_floats(rows * n, -3.0f, 3.0f);
      const auto residual = random_floats(rows * n, -3.0f, 3.0f);
      const auto weight = random_floats(n, 0.5f, 1.5f);

      DeviceBuffer<float> x_gpu(x), residual_gpu(residual), weight_gpu(weight), out_gpu(rows * n);
      out_gpu.poison();
      launch_rms_norm(x_gpu.data(), with_residual ? residual_gpu.data() : nullptr, weight_gpu.data(), rows, n, kEps,
                      out_gpu.data(), ctx());
      synchronize();

      auto x_ref = x;
      std::vector<float> out_ref(rows * n);
      for (int r = 0; r < rows; ++r) {
        float* row = &x_ref[r * n];
        if (with_residual) {
          cpu::add_rms_norm(row, &residual[r * n], weight.data(), n, kEps, &out_ref[r * n]);
        } else {
          cpu::rms_norm(row, weight.data(), n, kEps, &out_ref[r * n]);
        }
      }
      const std::string name = std::string(with_residual ? "add+rms_norm" : "rms_norm") + " n=" + std::to_string(n);
      expect_close(name + " out", out_gpu.download(), out_ref, kTolerance);
      expect_close(name + " x", x_gpu.download(), x_ref, kTolerance);
    }
  }
}

// The 16-bit copy is the output rounded to nearest even, bit for bit: in the pass itself where rows fit
// in registers (4096), and by a pass of its own where they do not (4099: not whole float4s; 41000:
// longer than the register path's 16384).
TEST_F(RmsNorm, HalfCopyIsTheOutputRounded) {
  for (const int n : {4096, 4099, 41000}) {
    for (const DType type : {DType::BF16, DType::F16}) {
      const int rows = 3;
      const auto x = random_floats(rows * n, -3.0f, 3.0f), residual = random_floats(rows * n, -3.0f, 3.0f);
      const auto weight = random_floats(n, 0.5f, 1.5f);
      DeviceBuffer<float> x_gpu(x), residual_gpu(residual), weight_gpu(weight), out_gpu(rows * n);
      DeviceBuffer<std::uint16_t> half_gpu(rows * n);
      out_gpu.poison();
      half_gpu.poison();
      launch_rms_norm(x_gpu.data(), residual_gpu.data(), weight_gpu.data(), rows, n, 1e-5f, out_gpu.data(), ctx(), {},
                      {half_gpu.data(), type});
      synchronize();
      const auto out = out_gpu.download();
      const auto half = half_gpu.download();
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < out.size(); ++i) {
        mismatches += half[i] != (type == DType::BF16 ? f32_to_bf16(out[i]) : f32_to_f16(out[i]));
      }
      EXPECT_EQ(mismatches, 0u) << dtype_name(type) << " n=" << n;
    }
  }
}

TEST_F(RmsNorm, InPlace) {
  const int rows = 2, n = 4099;
  const auto x = random_floats(rows * n), weight = random_floats(n);
  DeviceBuffer<float> x_gpu(x), weight_gpu(weight);
  launch_rms_norm(x_gpu.data(), nullptr, weight_gpu.data(), rows, n, 1e-6f, x_gpu.data(), ctx());
  synchronize();
  std::vector<float> ref(rows * n);
  for (int r = 0; r < rows; ++r) cpu::rms_norm(&x[r * n], weight.data(), n, 1e-6, &ref[r * n]);
  expect_close("rms_norm in place", x_gpu.download(), ref, kTolerance);
}

TEST_F(RmsNorm, QkNormMatchesCpuPerHead) {
  constexpr float kEps = 1e-6f;
  const HeadShape shapes[] = {{16, 8, 128}, {32, 8, 64}, {12, 2, 80}, {7, 7, 96}};
  for (const auto& shape : shapes) {
    const int n_tokens = 5;
    const int q_dim = shape.n_heads * shape.head_dim, kv_dim = shape.n_kv_heads * shape.head_dim;
    const auto q = random_floats(n_tokens * q_dim, -4.0f, 4.0f), k = random_floats(n_tokens * kv_dim, -4.0f, 4.0f);
    const auto q_weight = random_floats(shape.head_dim, 0.5f, 1.5f), k_weight = random_floats(shape.head_dim, 0.5f, 1.5f);
    DeviceBuffer<float> q_gpu(q), k_gpu(k), q_weight_gpu(q_weight), k_weight_gpu(k_weight);
    launch_qk_norm(q_gpu.data(), k_gpu.data(), q_weight_gpu.data(), k_weight_gpu.data(), n_tokens, shape, kEps,
                   ctx());
    synchronize();

    auto q_ref = q, k_ref = k;
    for (int h = 0; h < n_tokens * shape.n_heads; ++h) {
      float* head = &q_ref[h * shape.head_dim];
      cpu::rms_norm(head, q_weight.data(), shape.head_dim, kEps, head);
    }
    for (int h = 0; h < n_tokens * shape.n_kv_heads; ++h) {
      float* head = &k_ref[h * shape.head_dim];
      cpu::rms_norm(head, k_weight.data(), shape.head_dim, kEps, head);
    }
    const std::string name = "qk_norm " + std::to_string(shape.n_heads) + "/" + std::to_string(shape.n_kv_heads) +
                             " heads of " + std::to_string(shape.head_dim);
    expect_close(name + " q", q_gpu.download(), q_ref, kTolerance);
    expect_close(name + " k", k_gpu.download(), k_ref, kTolerance);
  }
}

}  // namespace
}  // namespace rf::gpu::test
