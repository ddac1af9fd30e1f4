#include <algorithm>
#include <cmath>

#include "backend/cpu/ops.h"
#include "backend/gpu/attention/attention.h"
#include "backend/gpu/elementwise/elementwise.h"
#include "backend/gpu/support/kernels.h"
#include "backend/gpu/gpu_test.h"
#include "util/half.h"

namespace rf::gpu::test {
namespace {

class Elementwise : public GpuTest {};

// fp32 with the CPU's expressions; expf and tanhf may differ from the CPU's by an ulp.
constexpr double kTolerance = 1e-5;

// SwiGLU and Gemma's GeGLU (tanh GELU) against the CPU's.
TEST_F(Elementwise, GatedProductsMatchCpu) {
  for (const MlpActivation act : {MlpActivation::Silu, MlpActivation::GeluTanh}) {
    const bool silu = act == MlpActivation::Silu;
    for (const std::size_t n : {std::size_t{1}, std::size_t{1001}, std::size_t{3 * 14336 + 5}}) {
      const auto gate = random_floats(n, -8.0f, 8.0f), up = random_floats(n, -2.0f, 2.0f);
      DeviceBuffer<float> gate_gpu(gate), up_gpu(up), out_gpu(n);
      out_gpu.poison();
      launch_glu(gate_gpu.data(), up_gpu.data(), n, act, out_gpu.data(), ctx());
      synchronize();
      std::vector<float> ref(n);
      (silu ? cpu::silu_mul : cpu::gelu_tanh_mul)(gate.data(), up.data(), n, ref.data());
      expect_close(std::string(silu ? "swiglu" : "geglu") + " n=" + std::to_string(n), out_gpu.download(), ref, kTolerance);
    }
  }
}

TEST_F(Elementwise, SwigluHalfCopyIsTheOutputRounded) {
  const std::size_t n = 3 * 14336 + 5;
  for (const DType type : {DType::BF16, DType::F16}) {
    DeviceBuffer<float> gate_gpu(random_floats(n, -8.0f, 8.0f)), up_gpu(random_floats(n, -2.0f, 2.0f)), out_gpu(n);
    DeviceBuffer<std::uint16_t> half_gpu(n);
    out_gpu.poison();
    half_gpu.poison();
    launch_glu(gate_gpu.data(), up_gpu.data(), n, MlpActivation::Silu, out_gpu.data(), ctx(), {half_gpu.data(), type});
    synchronize();
    const auto out = out_gpu.download();
    const auto half = half_gpu.download();
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < n; ++i) mismatches += half[i] != (type == DType::BF16 ? f32_to_bf16(out[i]) : f32_to_f16(out[i]));
    EXPECT_EQ(mismatches, 0u) << dtype_name(type);
  }
}

// A stacked gate/up product's SwiGLU: the copy launch_glu makes of the same gate and up rows. Rows
// of a width that is a multiple of 4 (whole or partial blocks of vectors) take the vector kernel.
TEST_F(Elementwise, StackedSwigluGivesTheCopyOfSeparateRows) {
  const int rows = 5;
  for (const auto& [width, type] : {std::pair{14336 + 3, DType::BF16}, {14336 + 3, DType::F16}, {14336, DType::BF16},
                                    {1000, DType::F16}}) {
    const auto gate_up = random_floats(std::size_t{2} * rows * width, -8.0f, 8.0f);
    std::vector<float> gate, up;
    for (int r = 0; r < rows; ++r) {
      const auto row = gate_up.begin() + std::size_t{2} * r * width;
      gate.insert(gate.end(), row, row + width);
      up.insert(up.end(), row + width, row + 2 * width);
    }
    const std::size_t n = std::size_t{rows} * width;
    DeviceBuffer<float> stacked_gpu(gate_up), gate_gpu(gate), up_gpu(up), out_gpu(n);
    DeviceBuffer<std::uint16_t> stacked_half(n), separate_half(n);
    stacked_half.poison();
    launch_swiglu_stacked(stacked_gpu.data(), rows, width, {stacked_half.data(), type}, ctx());
    launch_glu(gate_gpu.data(), up_gpu.data(), n, MlpActivation::Silu, out_gpu.data(), ctx(), {separate_half.data(), type});
    synchronize();
    EXPECT_EQ(stacked_half.download(), separate_half.download()) << dtype_name(type) << " width " << width;
  }
}

// Gemma 2's logit cap (30) against the CPU's, on values well past it.
TEST_F(Elementwise, SoftcapMatchesCpu) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{256000 + 7}}) {
    const auto x = random_floats(n, -100.0f, 100.0f);
    DeviceBuffer<float> x_gpu(x);
    launch_softcap(x_gpu.data(), n, 30.0f, ctx());
    synchronize();
    std::vector<float> ref = x;
    cpu::softcap(ref.data(), n, 30.0f);
    expect_close("softcap n=" + std::to_string(n), x_gpu.download(), ref, kTolerance);
  }
}

TEST_F(Elementwise, SoftmaxMatchesCpu) {
  for (const int n : {1, 7, 1000, 128256 + 3}) {
    const int rows = 3;
    const auto x = random_floats(rows * n, -20.0f, 20.0f);
    DeviceBuffer<float> x_gpu(x);
    launch_softmax_rows(x_gpu.data(), rows, n, 1.0f, 0, false, ctx());
    synchronize();
    // In double: the CPU's fp32 running sum drifts by ~sqrt(n) ulps over a vocabulary-sized row.
    std::vector<double> ref(x.begin(), x.end());
    for (int r = 0; r < rows; ++r) {
      double* row = &ref[r * n];
      const double max = *std::max_element(row, row + n);
      double sum = 0.0;
      for (int i = 0; i < n; ++i) sum += row[i] = std::exp(row[i] - max);
      for (int i = 0; i < n; ++i) row[i] /= sum;
    }
    expect_close("softmax n=" + std::to_string(n), x_gpu.download(), ref, kTolerance);
  }
}

}  // namespace
}  // namespace rf::gpu::test
