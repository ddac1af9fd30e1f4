// Decode GEMV bandwidth at Llama-3-8B's FFN shapes (gate/up, then down), one type at a time, for one
// token (quantized types also from x's int8 copy); for batches of 8 tokens, through the GEMV and
// through the GEMM, and of 32 through the GEMM (for quantized weights also given x's int8 copy: the
// integer tensor-core kernel); and the GEMM of decode batches of 8 to 32 tokens at every bf16 projection's shape,
// through launch_gemm (its choice: cuBLAS, or the tensor-core kernel of decode batches; cuBLAS alone
// under ROCMFORGE_FEW_TOKENS_GEMM=0) and through launch_gemm_few_tokens at each row tiling.
// Disabled by default (a measurement, not a check); tools/gpu_check.sh runs it with
// --gtest_also_run_disabled_tests.
#include <algorithm>
#include <memory>

#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/gpu_test.h"
#include "backend/gpu/runtime/event_timer.h"

namespace rf::gpu::test {
namespace {

struct Shape {
  std::size_t rows, cols;
};
constexpr Shape kShapes[] = {{14336, 4096}, {4096, 14336}};
constexpr std::size_t kWorkingSet = std::size_t{1} << 29;  // 512 MiB of weight copies, far beyond any L2
// Launches back to back between two events, so that launch latency hides behind the previous kernel;
// the median over several such batches.
constexpr int kBatches = 10, kLaunchesPerBatch = 20;

// The GEMV from fp32 x, the GEMV from x's int8 copy, the GEMM from x's 16-bit copy (as a decode
// batch's norm makes it): launch_gemm's choice, or the decode batches' kernel at row_tiles_; or the GEMM
// given x's int8 copy as well (a quantized decode batch's).
enum class Path { kGemv, kGemvInt8, kGemm, kFewTokens, kGemmInt8 };

class GemvBenchmark : public GpuTest {
 protected:
  void bench_gemv(DType type, Shape shape, int tokens, Path path, EventTimer& timer);
  int row_tiles_ = 0;
};

// One matrix shape and type, `tokens` vectors: weights tiled from a few encoded rows into copies that
// together exceed any L2, launched round-robin.
void GemvBenchmark::bench_gemv(DType type, Shape shape, int tokens, Path path, EventTimer& timer) {
  const auto matrix = tiled_matrix(type, shape.rows, shape.cols);
  const std::size_t matrix_bytes = matrix.size();
  const std::size_t copies = std::max<std::size_t>(2, kWorkingSet / matrix_bytes);
  std::vector<DeviceBuffer<std::uint8_t>> weights;
  for (std::size_t i = 0; i < copies; ++i) weights.emplace_back(matrix);
  DeviceBuffer<float> x(random_floats(shape.cols * tokens)), y(shape.rows * tokens);
  RoundedBuffer x_rounded(tokens, shape.cols);
  launch_quantize_activations(x.data(), tokens, static_cast<int>(shape.cols), x_rounded.view(), ctx());
  DeviceBuffer<std::uint16_t> x_half(shape.cols * tokens);
  const DType operand = gemm_operand_type(type);
  launch_round_to_16bit(x.data(), x_half.size(), operand, x_half.data(), ctx());

  auto launch = [&](int i) {
    const WeightMatrix w{type, shape.rows, shape.cols, weights[i % copies].data()};
    if (path == Path::kGemm || path == Path::kGemmInt8) {
      const WeightProduct product{w, y.data()};
      const QuantizedActivations rounded = path == Path::kGemmInt8 ? x_rounded.view() : QuantizedActivations{};
      launch_gemm_group(ctx(), std::span(&product, 1), x.data(), tokens, {x_half.data(), operand}, rounded);
    } else if (path == Path::kFewTokens) {
      launch_gemm_few_tokens(w, x_half.data(), tokens, y.data(), ctx(), row_tiles_);
    } else {
      const GemvInput input = path == Path::kGemvInt8 ? GemvInput{x.data(), x_rounded.view()} : GemvInput{x.data()};
      launch_gemv(w, input, tokens, y.data(), ctx());
    }
  };
  for (int i = 0; i < 3; ++i) launch(i);
  std::vector<float> ms;
  for (int batch = 0; batch < kBatches; ++batch) {
    timer.start(ctx());
    for (int i = 0; i < kLaunchesPerBatch; ++i) launch(i);
    ms.push_back(timer.stop_ms(ctx()) / kLaunchesPerBatch);
  }
  const double bytes = matrix_bytes + (shape.cols + shape.rows) * tokens * sizeof(float);
  const float t = median(ms);
  const std::string name = path == Path::kGemm       ? "gemm"
                           : path == Path::kGemmInt8 ? "gemm-i8"
                           : path == Path::kGemvInt8 ? "gemv-i8"
                           : path == Path::kGemv     ? "gemv"
                                                     : "few x" + std::to_string(row_tiles_);
  std::printf("[  bench   ] %-7s %-5s %5zux%-5zu x%d %7.1f MB  median %7.1f us  %7.1f GB/s\n", name.c_str(),
              std::string(dtype_name(type)).c_str(), shape.rows, shape.cols, tokens, bytes / 1e6, t * 1e3, bytes / t / 1e6);
}

TEST_F(GemvBenchmark, DISABLED_Bandwidth) {
  EventTimer timer;
  {  // The ceiling: a device-to-device copy, counting bytes read and written.
    DeviceBuffer<std::uint8_t> a(kWorkingSet / 2), b(kWorkingSet / 2);
    a.poison();
    std::vector<float> ms;
    for (int i = 0; i < 10; ++i) {
      timer.start(ctx());
      RF_GPU_CHECK(gpuMemcpyAsync(b.data(), a.data(), a.bytes(), gpuMemcpyDeviceToDevice, ctx().stream()));
      ms.push_back(timer.stop_ms(ctx()));
    }
    std::printf("[  bench   ] device copy %zu MiB: %.1f GB/s\n", a.bytes() >> 20, 2.0 * a.bytes() / median(ms) / 1e6);
  }
  for (const Shape& shape : kShapes) {
    for (const DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      bench_gemv(type, shape, 1, Path::kGemv, timer);
      if (gemv_reads_rounded(type)) bench_gemv(type, shape, 1, Path::kGemvInt8, timer);
    }
  }
  for (const Shape& shape : kShapes) {
    for (const DType type : {DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      for (const Path path : {Path::kGemv, Path::kGemm}) bench_gemv(type, shape, 8, path, timer);
      bench_gemv(type, shape, 32, Path::kGemm, timer);
      if (gemm_multiplies_rounded(type, 32)) {
        for (const int tokens : {8, 32}) bench_gemv(type, shape, tokens, Path::kGemmInt8, timer);
      }
    }
  }
}

// Llama 3 8B's bf16 projections of a decode batch: q/k/v stacked, o, gate/up stacked, down.
TEST_F(GemvBenchmark, DISABLED_DecodeBatchGemm) {
  EventTimer timer;
  for (const Shape& shape : {Shape{6144, 4096}, Shape{4096, 4096}, Shape{28672, 4096}, Shape{4096, 14336}}) {
    for (const int tokens : {8, 16, 32}) {
      bench_gemv(DType::BF16, shape, tokens, Path::kGemm, timer);
      if (!few_tokens_gemm_available()) continue;
      for (row_tiles_ = 2; row_tiles_ <= 3; ++row_tiles_) {
        if (few_tokens_fits(ctx(), row_tiles_, tokens)) bench_gemv(DType::BF16, shape, tokens, Path::kFewTokens, timer);
      }
    }
  }
}

}  // namespace
}  // namespace rf::gpu::test
