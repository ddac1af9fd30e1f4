// Rounding activations to int8 blocks (launch_quantize_activations, and the RMSNorm that does it in
// the same pass): the GPU's codes, scales and sums are the host reference's, bit for bit, and the
// reference keeps each value within half a step of what it stood for.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/norm/norm.h"
#include "backend/gpu/gpu_test.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

class QuantizeActivations : public GpuTest {};

TEST_F(QuantizeActivations, MatchesTheHostRounding) {
  for (const auto& [tokens, cols] : {std::pair{1, 4096}, {1, 96}, {3, 14336}, {5, 32}, {70, 4096}}) {
    auto x = random_floats(static_cast<std::size_t>(tokens) * cols, -4.0f, 4.0f);
    if (x.size() >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // a block of zeros: scale 0
    const RoundedValues want = round_to_int8(x);
    // The reference itself: every value within half a step of its code's value (and fp32's roundings of
    // 1 / scale, x * (1 / scale) and scale * code: each up to 127 steps' worth of 2^-24, 2.3e-5 of a
    // step together; 1e-5 failed once, seed 16920471188441106300), the largest of a block at +-127,
    // and the sums the codes' sums.
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::abs(x[i] - want.values[i]), want.scales[i / 32] * (0.5f + 3e-5f)) << i;
    }
    for (std::size_t b = 0; b < want.scales.size(); ++b) {
      int largest = 0, sum = 0;
      for (std::size_t i = 32 * b; i < 32 * (b + 1); ++i) largest = std::max(largest, std::abs(int{want.codes[i]})), sum += want.codes[i];
      ASSERT_EQ(largest, want.scales[b] > 0.0f ? 127 : 0) << b;
      ASSERT_EQ(sum, want.code_sums[b]) << b;
    }
    DeviceBuffer<float> x_gpu(x);
    RoundedBuffer out(tokens, cols);
    out.poison();
    launch_quantize_activations(x_gpu.data(), tokens, cols, out.view(), ctx());
    synchronize();
    expect_same_rounding(std::to_string(tokens) + "x" + std::to_string(cols), out.download(), want);
  }
}

// In the norm's own pass where its rows fit in registers (4096, 96), in a pass after it where they do
// not (16416: past the register path's 16384).
TEST_F(QuantizeActivations, RmsNormRoundsItsOutput) {
  for (const int n : {4096, 96, 16416}) {
    const int rows = 3;
    const auto x = random_floats(rows * n, -3.0f, 3.0f), residual = random_floats(rows * n), weight = random_floats(n);
    DeviceBuffer<float> x_gpu(x), residual_gpu(residual), weight_gpu(weight), out(rows * n);
    RoundedBuffer rounded(rows, n);
    out.poison();
    rounded.poison();
    launch_rms_norm(x_gpu.data(), residual_gpu.data(), weight_gpu.data(), rows, n, 1e-5f, out.data(), ctx(),
                    rounded.view());
    synchronize();
    expect_same_rounding("rms_norm n=" + std::to_string(n), rounded.download(), round_to_int8(out.download()));
  }
}

TEST_F(QuantizeActivations, RejectsPartialBlocks) {
  DeviceBuffer<float> x(100);
  RoundedBuffer out(1, 128);
  EXPECT_THROW(launch_quantize_activations(x.data(), 1, 100, out.view(), ctx()), Error);
}

}  // namespace
}  // namespace rf::gpu::test
