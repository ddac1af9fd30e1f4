#include <algorithm>

#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/gpu_test.h"
#include "util/error.h"

namespace rf::gpu::test {
namespace {

// The tiled kernel decodes weights exactly and accumulates in fp32; so does cuBLAS's SGEMM (TF32 is
// off unless asked for). The reference accumulates the same decoded weights in double.
constexpr double kExactTolerance = 1e-5;
// cuBLAS's tensor-core path multiplies 16-bit operands: the activations rounded to the weight's type
// (bf16 for bf16 weights, else f16), quantized weights decoded to f16. bf16 keeps 8 significant bits:
// each rounding is uniform within +-2^-9 relative, rms 2^-9 / sqrt(3) = 1.1e-3. The products are exact
// and summed in fp32, so with independent roundings of both operands the output is off by about
// sqrt(2) x 1.1e-3 = 1.6e-3 of its norm (f16, 11 bits: 4x less). 1e-2 leaves a factor of 6 over the
// worst case and still fails any indexing mistake, which is off by O(1).
constexpr double kSixteenBitTolerance = 1e-2;
// x rounded to int8 in blocks of 32 moves a product by about 4e-3 of its norm (as the GEMV's integer
// path: gemv_test.cpp).
constexpr double kInt8Tolerance = 1e-2;

struct Case {
  DType type;
  int tokens;
  std::size_t rows, cols;
};

// Odd sizes (no multiple of the 64-wide tiles), partial K tiles, and Q6_K's slices wider than a tile.
constexpr Case kCases[] = {
    {DType::F32, 67, 129, 333},   {DType::F32, 5, 37, 1001},   {DType::F32, 67, 130, 4096}, {DType::F16, 67, 65, 7},
    {DType::F16, 3, 200, 520},    {DType::BF16, 66, 129, 96},  {DType::BF16, 64, 64, 4096},  {DType::Q8_0, 67, 129, 96},
    {DType::Q8_0, 2, 70, 4096},   {DType::Q4_0, 67, 100, 160}, {DType::Q4_K, 67, 129, 768},  {DType::Q4_K, 67, 130, 4096},
    {DType::Q6_K, 67, 129, 768},  {DType::Q6_K, 9, 33, 256},
    // GGML's other types: 32-element blocks in rows of 20, 22, 24 and 18 bytes a block, and the
    // super-blocks (Q2_K's and Q3_K's slices, like Q6_K's, wider than a tile).
    {DType::Q4_1, 67, 129, 96},   {DType::Q5_0, 67, 100, 160}, {DType::Q5_1, 5, 70, 4096},  {DType::IQ4_NL, 67, 129, 96},
    {DType::Q2_K, 67, 129, 768},  {DType::Q3_K, 67, 130, 768}, {DType::Q3_K, 9, 33, 256},   {DType::Q5_K, 67, 129, 768},
    {DType::IQ4_XS, 67, 130, 4096}, {DType::IQ4_XS, 9, 33, 256},
    // Decode batches of 16-bit weights (launch_gemm_few_tokens where built for the device).
    {DType::BF16, 8, 300, 512},   {DType::F16, 5, 65, 256},
};

class Gemm : public GpuTest {
 protected:
  // Runs `multiply` on fresh random W (as c.type) and x, the output poisoned first, and compares with
  // the product of the decoded weights in double. `w_offset` bytes shift W off its allocation's alignment.
  template <class Multiply>
  void check(const std::string& what, const Case& c, double tolerance, Multiply multiply, std::size_t w_offset = 0) {
    const auto w = encode_rows(c.type, random_floats(c.rows * c.cols), c.rows, c.cols);
    const auto x = random_floats(c.tokens * c.cols);
    std::vector<std::uint8_t> w_bytes(w_offset, 0);
    w_bytes.insert(w_bytes.end(), w.bytes.begin(), w.bytes.end());
    DeviceBuffer<std::uint8_t> w_gpu(w_bytes);
    DeviceBuffer<float> x_gpu(x), out_gpu(c.tokens * c.rows);
    out_gpu.poison();
    multiply(WeightMatrix{c.type, c.rows, c.cols, w_gpu.data() + w_offset}, x_gpu.data(), c.tokens, out_gpu.data());
    synchronize();

    std::vector<double> ref(c.tokens * c.rows, 0.0);
    for (int t = 0; t < c.tokens; ++t) {
      for (std::size_t r = 0; r < c.rows; ++r) {
        double dot = 0.0;
        for (std::size_t i = 0; i < c.cols; ++i) dot += static_cast<double>(w.decoded[r * c.cols + i]) * x[t * c.cols + i];
        ref[t * c.rows + r] = dot;
      }
    }
    expect_close(what + " " + std::string(dtype_name(c.type)) + " " + std::to_string(c.tokens) + "x" +
                     std::to_string(c.rows) + "x" + std::to_string(c.cols),
                 out_gpu.download(), ref, tolerance);
  }
};

TEST_F(Gemm, TiledKernelMatchesDecodedWeightsForEveryType) {
  for (const Case& c : kCases) {
    check("gemm tiled", c, kExactTolerance, [&](const WeightMatrix& w, const float* x, int n, float* out) {
      launch_gemm_tiled(w, x, n, out, ctx());
    });
  }
}

// Plain rows off 16-byte alignment (by one element) are read element by element.
TEST_F(Gemm, TiledKernelReadsMisalignedPlainRows) {
  for (const Case& c : {Case{DType::F16, 67, 65, 520}, Case{DType::F32, 9, 70, 260}}) {
    const std::size_t offset = dtype_info(c.type).block_bytes;
    check("gemm tiled, W misaligned", c, kExactTolerance, [&](const WeightMatrix& w, const float* x, int n, float* out) {
      launch_gemm_tiled(w, x, n, out, ctx());
    }, offset);
  }
}

TEST_F(Gemm, LaunchGemmMatchesDecodedWeightsForEveryType) {
  for (const Case& c : kCases) {
    const double tolerance = c.type == DType::F32 ? kExactTolerance : kSixteenBitTolerance;
    check("gemm", c, tolerance, [&](const WeightMatrix& w, const float* x, int n, float* out) {
      launch_gemm(ctx(), w, x, n, out);
    });
  }
}

// Given x's 16-bit copy, the GEMM multiplies it instead of rounding x itself: the same bits as without
// (the copy is what the GEMM's own rounding makes), and a copy that is not x's shows.
TEST_F(Gemm, TakesTheCallersHalfCopy) {
  for (const Case& c : {Case{DType::BF16, 7, 129, 4096}, Case{DType::F16, 3, 200, 520}, Case{DType::Q8_0, 2, 70, 4096}}) {
    const auto w = encode_rows(c.type, random_floats(c.rows * c.cols), c.rows, c.cols);
    DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
    DeviceBuffer<float> x_gpu(random_floats(c.tokens * c.cols)), own(c.tokens * c.rows), given(c.tokens * c.rows);
    DeviceBuffer<std::uint16_t> half(c.tokens * c.cols);
    const DType operand = gemm_operand_type(c.type);
    const WeightMatrix matrix{c.type, c.rows, c.cols, w_gpu.data()};
    const WeightProduct product{matrix, given.data()};
    launch_gemm(ctx(), matrix, x_gpu.data(), c.tokens, own.data());
    launch_round_to_16bit(x_gpu.data(), c.tokens * c.cols, operand, half.data(), ctx());
    launch_gemm_group(ctx(), std::span(&product, 1), x_gpu.data(), c.tokens, {half.data(), operand});
    synchronize();
    EXPECT_EQ(bits(own.download()), bits(given.download())) << dtype_name(c.type);
    if (!gemm_takes_half_copy()) continue;  // the tiled GEMM multiplies fp32 x, copy or not
    RF_GPU_CHECK(gpuMemset(half.data(), 0, half.bytes()));  // a copy of zeros: the products are zeros
    launch_gemm_group(ctx(), std::span(&product, 1), x_gpu.data(), c.tokens, {half.data(), operand});
    synchronize();
    const auto zeros = given.download();
    EXPECT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0.0f; })) << dtype_name(c.type);
  }
}

// The decode batches' integer tensor-core GEMM of quantized weights, against the product of the decoded
// weights with what x's int8 codes stand for (integer sums, exact, then the scales in fp32: the exact
// tolerance) and within x's rounding of the product with x itself: whole and partial blocks of 16 rows
// and of 8 tokens, each count of token tiles, Q6_K's rows of 2-byte alignment only (768 columns), the
// long rows of down. launch_gemm_group given the int8 copy takes the same path.
TEST_F(Gemm, QuantizedFewTokensKernelMatchesTheRoundedX) {
  if (!quantized_few_tokens_available()) GTEST_SKIP() << "no tensor-core code for this device";
  struct Shape {
    int tokens;
    std::size_t rows, cols;
  };
  const Shape shapes[] = {{2, 70, 4096}, {5, 37, 768}, {8, 300, 512}, {17, 129, 256}, {32, 48, 14336}, {64, 65, 1024}};
  for (const DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (const Shape& c : shapes) {
      const auto w = encode_rows(type, random_floats(c.rows * c.cols), c.rows, c.cols);
      const auto x = random_floats(c.tokens * c.cols, -2.0f, 2.0f);
      const RoundedValues rounded = round_to_int8(x);
      DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
      DeviceBuffer<float> x_gpu(x), out(c.tokens * c.rows), glue(c.tokens * c.rows);
      out.poison();
      glue.poison();
      RoundedBuffer x_rounded(c.tokens, c.cols);
      launch_quantize_activations(x_gpu.data(), c.tokens, c.cols, x_rounded.view(), ctx());
      const WeightMatrix matrix{type, c.rows, c.cols, w_gpu.data()};
      launch_gemm_quantized_few_tokens(matrix, x_rounded.view(), c.tokens, out.data(), ctx());
      const WeightProduct product{matrix, glue.data()};
      launch_gemm_group(ctx(), std::span(&product, 1), x_gpu.data(), c.tokens, {}, x_rounded.view());
      synchronize();
      const std::string name = std::string(dtype_name(type)) + " " + std::to_string(c.tokens) + "x" +
                               std::to_string(c.rows) + "x" + std::to_string(c.cols);
      const auto got = out.download();
      EXPECT_EQ(bits(got), bits(glue.download())) << name << ": launch_gemm_group";
      std::vector<double> want, want_exact;
      for (int t = 0; t < c.tokens; ++t) {
        auto token_of = [&](const std::vector<float>& v) {
          return std::vector<float>(v.begin() + t * c.cols, v.begin() + (t + 1) * c.cols);
        };
        const auto r = reference_product(w, c.rows, c.cols, token_of(rounded.values));
        const auto e = reference_product(w, c.rows, c.cols, token_of(x));
        want.insert(want.end(), r.begin(), r.end());
        want_exact.insert(want_exact.end(), e.begin(), e.end());
      }
      expect_close("int8 few tokens " + name, got, want, kExactTolerance);
      expect_close("int8 few tokens " + name + " vs exact x", got, want_exact, kInt8Tolerance);
    }
  }
}

// The decode batches' tensor-core GEMM, every row tiling, against the product of the 16-bit operands
// in double: whole and partial blocks of rows and of 8 tokens, one stage of columns and many, and more
// blocks than one wave holds.
TEST_F(Gemm, FewTokensKernelMatchesTheRoundedOperands) {
  if (!few_tokens_gemm_available()) GTEST_SKIP() << "no tensor-core code for this device";
  for (const Case& c : {Case{DType::BF16, 32, 6144 / 8, 4096}, Case{DType::BF16, 13, 129, 256},
                        Case{DType::F16, 1, 47, 256}, Case{DType::F16, 8, 200, 1024}, Case{DType::BF16, 27, 64, 14336 / 4},
                        Case{DType::BF16, 3, 9000, 512}}) {
    for (const int tiles : {2, 3}) {
      if (!few_tokens_fits(ctx(), tiles, c.tokens)) continue;  // this GPU's shared memory is too small for them
      auto multiply = [&](const WeightMatrix& w, const float* x, int n, float* out) {
        DeviceBuffer<std::uint16_t> half(static_cast<std::size_t>(n) * w.cols);
        launch_round_to_16bit(x, half.size(), w.dtype, half.data(), ctx());
        launch_gemm_few_tokens(w, half.data(), n, out, ctx(), tiles);
        synchronize();
      };
      check("few tokens x" + std::to_string(tiles), c, kSixteenBitTolerance, multiply);
    }
  }
}

// A token's output does not depend on the tokens beside it: one token alone, and the same token as
// the 27th of 32, give the same bits at every row tiling.
TEST_F(Gemm, FewTokensKernelIsBatchInvariant) {
  if (!few_tokens_gemm_available()) GTEST_SKIP() << "no tensor-core code for this device";
  constexpr std::size_t kRows = 200, kCols = 1024;
  constexpr int kTokens = 32, kToken = 26;
  const auto w = encode_rows(DType::BF16, random_floats(kRows * kCols), kRows, kCols);
  DeviceBuffer<std::uint8_t> w_gpu(w.bytes);
  DeviceBuffer<float> x(random_floats(kTokens * kCols)), all(kTokens * kRows), one(kRows);
  DeviceBuffer<std::uint16_t> half(kTokens * kCols);
  launch_round_to_16bit(x.data(), half.size(), DType::BF16, half.data(), ctx());
  const WeightMatrix matrix{DType::BF16, kRows, kCols, w_gpu.data()};
  for (const int tiles : {2, 3}) {
    if (!few_tokens_fits(ctx(), tiles, kTokens)) continue;  // this GPU's shared memory is too small for them
    all.poison();
    one.poison();
    launch_gemm_few_tokens(matrix, half.data(), kTokens, all.data(), ctx(), tiles);
    launch_gemm_few_tokens(matrix, half.data() + kToken * kCols, 1, one.data(), ctx(), tiles);
    synchronize();
    const auto batch = all.download();
    const std::vector<float> alone(batch.begin() + kToken * kRows, batch.begin() + (kToken + 1) * kRows);
    EXPECT_EQ(bits(alone), bits(one.download())) << tiles << " row tiles";
  }
}

TEST_F(Gemm, FewTokensKernelRejectsWhatItCannotTake) {
  if (!few_tokens_gemm_available()) GTEST_SKIP() << "no tensor-core code for this device";
  DeviceBuffer<std::uint8_t> w(64 * 512 * 2);
  DeviceBuffer<std::uint16_t> x(33 * 512);
  DeviceBuffer<float> out(33 * 64);
  const WeightMatrix bf16{DType::BF16, 64, 512, w.data()};
  EXPECT_THROW(launch_gemm_few_tokens({DType::BF16, 64, 500, w.data()}, x.data(), 2, out.data(), ctx(), 2), Error);
  EXPECT_THROW(launch_gemm_few_tokens({DType::Q8_0, 64, 512, w.data()}, x.data(), 2, out.data(), ctx(), 2), Error);
  EXPECT_THROW(launch_gemm_few_tokens(bf16, x.data(), 33, out.data(), ctx(), 2), Error);
  EXPECT_THROW(launch_gemm_few_tokens(bf16, x.data(), 2, out.data(), ctx(), 4), Error);
  // Every sm_80+ GPU has the 92 KiB of 32 rows and 8 tokens; no GPU takes what the kernel does not.
  EXPECT_TRUE(few_tokens_fits(ctx(), 2, 8));
  EXPECT_FALSE(few_tokens_fits(ctx(), 4, 8));
  EXPECT_FALSE(few_tokens_fits(ctx(), 2, 33));
  EXPECT_THROW(launch_gemm_few_tokens(bf16, x.data() + 1, 2, out.data(), ctx(), 2), Error);
}

TEST_F(Gemm, RejectsRowsOfPartialBlocks) {
  DeviceBuffer<float> x(2 * 100), out(2 * 2);
  DeviceBuffer<std::uint8_t> w(2 * 1024);
  EXPECT_THROW(launch_gemm_tiled({DType::Q4_K, 2, 100, w.data()}, x.data(), 2, out.data(), ctx()), Error);
  EXPECT_THROW(launch_gemm(ctx(), {DType::Q4_K, 2, 100, w.data()}, x.data(), 2, out.data()), Error);
}

}  // namespace
}  // namespace rf::gpu::test
