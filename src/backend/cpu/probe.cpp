#include "backend/cpu/probe.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "backend/cpu/matmul.h"
#include "util/half.h"
#include "util/thread_pool.h"

namespace rf::cpu {

namespace {

template <typename Fn>
double median_seconds(int runs, Fn fn) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool) {
  const std::size_t n = std::size_t{256} << 20;  // 1 GiB of floats
  std::vector<float> data(n);
  std::iota(data.begin(), data.end(), 1.0f);  // not zeros: every page is real and read
  std::vector<float> sums(pool.size() * 16);
  auto read_all = [&] {
    pool.parallel_for(n, 1 << 20, [&](std::size_t begin, std::size_t end) {
      float acc[8] = {};
      for (std::size_t i = begin; i + 8 <= end; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += data[i + j];
      }
      sums[(begin * pool.size() / n) * 16] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    });
  };
  read_all();  // warm-up
  return static_cast<double>(n * sizeof(float)) / median_seconds(5, read_all);
}

double measure_matmul_flops(ThreadPool& pool) {
  // 64 tokens per weight tile: enough that arithmetic, not memory, bounds it, and x stays in cache.
  const std::size_t rows = 4096, cols = 2048, tokens = 64;
  // bf16 weights, as most checkpoints store them (f32 tiles are slower to stage).
  std::vector<std::uint16_t> w(rows * cols);
  std::vector<float> x(tokens * cols), out(tokens * rows);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(static_cast<float>(i % 97) * 0.01f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 89) * 0.01f;
  const WeightMatrix m{DType::BF16, rows, cols, w.data()};
  auto product = [&] { matmul(m, x.data(), tokens, out.data(), pool); };
  product();
  return 2.0 * rows * cols * tokens / median_seconds(5, product);
}

}  // namespace rf::cpu
