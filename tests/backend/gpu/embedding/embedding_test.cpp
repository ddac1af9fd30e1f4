#include "backend/gpu/embedding/embedding.h"
#include "backend/gpu/gpu_test.h"

namespace rf::gpu::test {
namespace {

class Embedding : public GpuTest {};

// Decoding is exact (every stored value is a float), and so is the scale's product (one fp32 rounding
// on either side), so the rows must match the CPU's bit for bit.
TEST_F(Embedding, MatchesCpuDequantizeForEveryType) {
  constexpr std::size_t kVocab = 300;
  struct Case {
    DType type;
    std::size_t cols;
  };
  const Case cases[] = {{DType::F32, 4096}, {DType::F32, 1001}, {DType::F16, 4096}, {DType::F16, 333},
                        {DType::BF16, 4096}, {DType::BF16, 7},  {DType::Q8_0, 4096}, {DType::Q8_0, 96},
                        {DType::Q4_0, 4096}, {DType::Q4_0, 96}, {DType::Q4_K, 4096}, {DType::Q4_K, 768},
                        {DType::Q6_K, 4096}, {DType::Q6_K, 768},  {DType::Q4_1, 4096}, {DType::Q4_1, 96},
                        {DType::Q5_0, 4096}, {DType::Q5_0, 96},  {DType::Q5_1, 4096}, {DType::Q5_1, 96},
                        {DType::IQ4_NL, 4096}, {DType::IQ4_NL, 96}, {DType::Q2_K, 4096}, {DType::Q2_K, 768},
                        {DType::Q3_K, 4096}, {DType::Q3_K, 768}, {DType::Q5_K, 4096}, {DType::Q5_K, 768},
                        {DType::IQ4_XS, 4096}, {DType::IQ4_XS, 768}};
  for (const auto& c : cases) {
    const auto table = encode_rows(c.type, random_floats(kVocab * c.cols, -2.0f, 2.0f), kVocab, c.cols);
    std::vector<std::int32_t> tokens = {0, static_cast<std::int32_t>(kVocab - 1)};
    for (int i = 0; i < 9; ++i) tokens.push_back(random_int(0, kVocab - 1));

    DeviceBuffer<std::uint8_t> table_gpu(table.bytes);
    DeviceBuffer<std::int32_t> tokens_gpu(tokens);
    DeviceBuffer<float> out(tokens.size() * c.cols);
    for (const float scale : {1.0f, 48.0f}) {  // 48: Gemma 2 2B's sqrt(hidden), an exact product too
      out.poison();
      launch_embedding({c.type, kVocab, c.cols, table_gpu.data()}, tokens_gpu.data(), static_cast<int>(tokens.size()),
                       out.data(), ctx(), nullptr, scale);
      synchronize();

      std::vector<float> ref(tokens.size() * c.cols);
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        for (std::size_t i = 0; i < c.cols; ++i) ref[t * c.cols + i] = table.decoded[tokens[t] * c.cols + i] * scale;
      }
      expect_close("embedding " + std::string(dtype_name(c.type)) + " x" + std::to_string(c.cols) + " scale " +
                       std::to_string(scale),
                   out.download(), ref, 0.0);
    }
  }
}

}  // namespace
}  // namespace rf::gpu::test
