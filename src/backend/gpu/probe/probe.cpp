#include "backend/gpu/probe/probe.h"

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/event_timer.h"
#include "backend/gpu/probe/probe_kernels.h"

namespace rf::gpu {

namespace {

constexpr int kRuns = 10;

// Seconds `work` takes on ctx's stream: the median of kRuns.
template <class Work>
double median_seconds(const DeviceContext& ctx, Work work) {
  return median_ms(ctx, kRuns, 1, work) / 1e3;
}

}  // namespace

double measure_read_bandwidth(const DeviceContext& ctx) {
  constexpr std::size_t kFloats = std::size_t{1} << 28;  // 1 GiB, far beyond any L2 (50 to 256 MiB)
  constexpr unsigned kBlocks = 8192;
  DeviceBuffer<float> data(kFloats), partial(kBlocks);
  launch_fill_random(data.data(), data.size(), ctx);
  const double seconds = median_seconds(ctx, [&] { launch_read_all(data.data(), data.size(), partial.data(), kBlocks, ctx); });
  return data.bytes() / seconds;
}

double measure_matmul_flops(const DeviceContext& ctx) {
  constexpr std::size_t kRows = 8192, kCols = 8192;
  constexpr int kTokens = 4096;
  DeviceBuffer<std::uint16_t> weights(kRows * kCols);
  DeviceBuffer<float> x(kTokens * kCols), out(kTokens * kRows);
  launch_fill_random_bf16(weights.data(), weights.size(), ctx);
  launch_fill_random(x.data(), x.size(), ctx);
  const WeightMatrix w{DType::BF16, kRows, kCols, weights.data()};
  const double seconds = median_seconds(ctx, [&] { launch_gemm(ctx, w, x.data(), kTokens, out.data()); });
  return 2.0 * kRows * kCols * kTokens / seconds;
}

}  // namespace rf::gpu
