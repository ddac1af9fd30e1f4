#include "backend/gpu/ops.h"
#include "gpu_test.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

class Gemv : public GpuTest {};

// Weights decode exactly to fp32 and the products accumulate in fp32; the reference accumulates the
// same decoded weights in double. (No bf16/f16 arithmetic happens, so no wider tolerance is needed.)
constexpr double kTolerance = 1e-5;

TEST_F(Gemv, MatchesDecodedWeightsForEveryType) {
  struct Case {
    DType type;
    std::size_t rows, cols;
  };
  const Case cases[] = {
      {DType::F32, 1037, 4096},  {DType::F32, 37, 1001},  {DType::F16, 1037, 4096}, {DType::F16, 5, 333},
      {DType::BF16, 1037, 4096}, {DType::BF16, 3, 7},     {DType::Q8_0, 1037, 4096}, {DType::Q8_0, 37, 96},
      {DType::Q4_0, 1037, 4096}, {DType::Q4_0, 1, 96},    {DType::Q4_K, 1037, 4096}, {DType::Q4_K, 37, 768},
      {DType::Q6_K, 1037, 4096}, {DType::Q6_K, 37, 768},
      // Rows longer than the kernel's x chunk (4096 columns), the last chunk partial.
      {DType::F32, 37, 8196},    {DType::F16, 5, 9001},   {DType::Q8_0, 3, 4160},    {DType::Q4_K, 37, 14336},
      {DType::Q6_K, 7, 4352},
  };
  for (const auto& c : cases) {
    const auto w = encode_rows(c.type, random_floats(c.rows * c.cols), c.rows, c.cols);
    const auto x = random_floats(c.cols);
    DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
    DeviceBuffer<float> x_gpu(x), y_gpu(c.rows);
    y_gpu.poison();
    launch_gemv({c.type, c.rows, c.cols, w_gpu.data()}, x_gpu.data(), y_gpu.data(), stream());
    synchronize();

    std::vector<double> ref(c.rows, 0.0);
    for (std::size_t r = 0; r < c.rows; ++r) {
      for (std::size_t i = 0; i < c.cols; ++i) ref[r] += static_cast<double>(w.decoded[r * c.cols + i]) * x[i];
    }
    expect_close("gemv " + std::string(dtype_name(c.type)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols),
                 y_gpu.download(), ref, kTolerance);
  }
}

TEST_F(Gemv, RejectsRowsOfPartialBlocks) {
  DeviceBuffer<float> x(100), y(2);
  DeviceBuffer<std::uint8_t> w(2 * 1024);
  EXPECT_THROW(launch_gemv({DType::Q4_K, 2, 100, w.data()}, x.data(), y.data(), stream()), Error);
}

}  // namespace
}  // namespace rf::gpu::test
