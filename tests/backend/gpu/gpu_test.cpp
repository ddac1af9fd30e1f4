#include "gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/quant.h"
#include "backend/gpu/device_layout.h"
#include "backend/gpu/gpu_device.h"

namespace rf::gpu::test {

namespace {

const DeviceScan& devices() {
  static const DeviceScan scan = scan_devices();
  return scan;
}

std::uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("RF_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
}

}  // namespace

void GpuTest::SetUp() {
  if (devices().devices.empty()) GTEST_SKIP() << devices().why_none;
  const std::uint64_t seed = fresh_seed();
  std::printf("[   seed   ] RF_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  rng_.seed(seed);
  stream_.emplace();
}

std::vector<float> GpuTest::random_floats(std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (auto& v : values) v = dist(rng_);
  return values;
}

int GpuTest::random_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

std::vector<std::uint32_t> bits(const std::vector<float>& values) {
  std::vector<std::uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

void expect_close(const std::string& what, const std::vector<float>& out, const std::vector<double>& ref,
                  double tolerance) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  double max_abs = 0.0, err_sq = 0.0, ref_sq = 0.0;
  std::size_t not_finite = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++not_finite;
      continue;
    }
    const double err = std::abs(out[i] - ref[i]);
    max_abs = std::max(max_abs, err);
    err_sq += err * err;
    ref_sq += ref[i] * ref[i];
  }
  const double rel = ref_sq > 0.0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
  std::printf("[  error   ] %-44s max abs %.3e  rel %.3e  (tolerance %.0e)%s\n", what.c_str(), max_abs, rel, tolerance,
              rel <= tolerance && not_finite == 0 ? "" : "  FAIL");
  ::testing::Test::RecordProperty(what + " rel", std::to_string(rel));
  EXPECT_EQ(not_finite, 0u) << what << ": outputs not written (still NaN) or not finite";
  EXPECT_LE(rel, tolerance) << what;
}

void expect_close(const std::string& what, const std::vector<float>& out, const std::vector<float>& ref,
                  double tolerance) {
  expect_close(what, out, std::vector<double>(ref.begin(), ref.end()), tolerance);
}

std::vector<std::uint8_t> GpuTest::tiled_matrix(DType type, std::size_t rows, std::size_t cols) {
  constexpr std::size_t kDistinctRows = 256;
  const auto distinct = encode_rows(type, random_floats(kDistinctRows * cols), kDistinctRows, cols);
  std::vector<std::uint8_t> matrix(row_bytes(type, cols) * rows);
  for (std::size_t offset = 0; offset < matrix.size(); offset += distinct.bytes.size()) {
    std::copy_n(distinct.bytes.begin(), std::min(distinct.bytes.size(), matrix.size() - offset), &matrix[offset]);
  }
  return matrix;
}

EncodedRows encode_rows(DType type, const std::vector<float>& values, std::size_t rows, std::size_t cols) {
  const std::size_t stride = row_bytes(type, cols);
  EncodedRows encoded{std::vector<std::uint8_t>(rows * stride), std::vector<float>(rows * cols)};
  for (std::size_t r = 0; r < rows; ++r) {
    cpu::quantize_row(type, &values[r * cols], &encoded.bytes[r * stride], cols);
    cpu::dequantize_row(type, &encoded.bytes[r * stride], &encoded.decoded[r * cols], cols);
  }
  encoded.bytes = to_device_layout({type, rows, cols, encoded.bytes.data()});
  return encoded;
}

}  // namespace rf::gpu::test
