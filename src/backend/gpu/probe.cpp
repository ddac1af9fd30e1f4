#include "backend/gpu/probe.h"

#include <algorithm>
#include <vector>

#include "backend/gpu/device_buffer.h"
#include "backend/gpu/probe_kernels.h"

namespace rf::gpu {

namespace {

constexpr int kRuns = 10;

// Seconds `work` takes on `stream`: the median of kRuns, after one run to warm up.
template <class Work>
double median_seconds(gpuStream_t stream, Work work) {
  gpuEvent_t start, stop;
  RF_GPU_CHECK(gpuEventCreate(&start));
  RF_GPU_CHECK(gpuEventCreate(&stop));
  std::vector<float> ms(kRuns);
  try {
    work();
    for (auto& m : ms) {
      RF_GPU_CHECK(gpuEventRecord(start, stream));
      work();
      RF_GPU_CHECK(gpuEventRecord(stop, stream));
      RF_GPU_CHECK(gpuEventSynchronize(stop));
      RF_GPU_CHECK(gpuEventElapsedTime(&m, start, stop));
    }
  } catch (...) {
    (void)gpuEventDestroy(start);
    (void)gpuEventDestroy(stop);
    throw;
  }
  (void)gpuEventDestroy(start);
  (void)gpuEventDestroy(stop);
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return ms[kRuns / 2] / 1e3;
}

}  // namespace

double measure_read_bandwidth(gpuStream_t stream) {
  constexpr std::size_t kFloats = std::size_t{1} << 28;  // 1 GiB, far beyond any L2 (50 to 256 MiB)
  constexpr unsigned kBlocks = 8192;
  DeviceBuffer<float> data(kFloats), partial(kBlocks);
  launch_fill_random(data.data(), data.size(), stream);
  const double seconds = median_seconds(stream, [&] { launch_read_all(data.data(), data.size(), partial.data(), kBlocks, stream); });
  return data.bytes() / seconds;
}

double measure_matmul_flops(GemmContext& gemm, gpuStream_t stream) {
  constexpr std::size_t kRows = 8192, kCols = 8192;
  constexpr int kTokens = 4096;
  DeviceBuffer<std::uint16_t> weights(kRows * kCols);
  DeviceBuffer<float> x(kTokens * kCols), out(kTokens * kRows);
  launch_fill_random_bf16(weights.data(), weights.size(), stream);
  launch_fill_random(x.data(), x.size(), stream);
  const WeightMatrix w{DType::BF16, kRows, kCols, weights.data()};
  const double seconds = median_seconds(stream, [&] { launch_gemm(gemm, w, x.data(), kTokens, out.data()); });
  return 2.0 * kRows * kCols * kTokens / seconds;
}

}  // namespace rf::gpu
