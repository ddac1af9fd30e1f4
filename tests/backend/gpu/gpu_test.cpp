#include "backend/gpu/gpu_test.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/quant.h"
#include "backend/gpu/quant/device_layout.h"
#include "backend/gpu/runtime/devices.h"

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
  ctx_.emplace(0);
}

std::vector<float> GpuTest::random_floats(std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (auto& v : values) v = dist(rng_);
  return values;
}

int GpuTest::random_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

Batch decode_batch(const std::vector<int>& active, const std::vector<std::int32_t>& tokens, int position,
                   int blocks_per_sequence) {
  Batch batch;
  for (int s : active) {
    std::vector<std::int32_t> table(blocks_per_sequence);
    for (int b = 0; b < blocks_per_sequence; ++b) table[b] = s * blocks_per_sequence + b;
    batch.block_tables.push_back(table);
    batch.add_sequence(static_cast<std::int32_t>(batch.block_tables.size() - 1), &tokens[s], 1, position, true);
  }
  return batch;
}

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

std::vector<double> reference_product(const EncodedRows& w, std::size_t rows, std::size_t cols, const std::vector<float>& x) {
  std::vector<double> ref(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < cols; ++i) ref[r] += static_cast<double>(w.decoded[r * cols + i]) * x[i];
  }
  return ref;
}

RoundedValues round_to_int8(const std::vector<float>& x) {
  constexpr std::size_t kBlock = 32;
  RoundedValues r{std::vector<std::int8_t>(x.size()), {}, {}, std::vector<float>(x.size())};
  for (std::size_t b = 0; b < x.size() / kBlock; ++b) {
    float largest = 0.0f;
    for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i) largest = std::max(largest, std::abs(x[i]));
    const float scale = largest / 127.0f;
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    std::int32_t sum = 0;
    for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i) {
      r.codes[i] = static_cast<std::int8_t>(std::nearbyint(x[i] * inverse));  // to nearest, ties to even
      sum += r.codes[i];
      r.values[i] = scale * r.codes[i];
    }
    r.scales.push_back(scale);
    r.code_sums.push_back(sum);
  }
  return r;
}

void expect_same_rounding(const std::string& what, const RoundedValues& got, const RoundedValues& want) {
  EXPECT_EQ(got.codes, want.codes) << what;
  EXPECT_EQ(bits(got.scales), bits(want.scales)) << what;
  EXPECT_EQ(got.code_sums, want.code_sums) << what;
}

RoundedBuffer::RoundedBuffer(std::size_t tokens, std::size_t cols)
    : values_(tokens * cols), storage_(quantized_activations_bytes(tokens, cols)),
      view_(quantized_activations_at(storage_.data(), tokens, cols)) {}

RoundedValues RoundedBuffer::download() const {
  const std::vector<std::uint8_t> bytes = storage_.download();
  auto part = [&](const void* device, std::size_t count, auto* out) {
    out->resize(count);
    const std::size_t offset = static_cast<const std::uint8_t*>(device) - storage_.data();
    std::memcpy(out->data(), bytes.data() + offset, count * sizeof((*out)[0]));
  };
  RoundedValues r;
  part(view_.codes, values_, &r.codes);
  part(view_.scales, values_ / 32, &r.scales);
  part(view_.code_sums, values_ / 32, &r.code_sums);
  for (std::size_t i = 0; i < values_; ++i) r.values.push_back(r.scales[i / 32] * r.codes[i]);
  return r;
}

}  // namespace rf::gpu::test
