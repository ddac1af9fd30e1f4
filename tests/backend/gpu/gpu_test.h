#pragma once
// What every GPU kernel test shares: skipping where there is no device, fresh random inputs with
// the seed printed (RF_TEST_SEED=<seed> replays one), and the comparison with the CPU reference.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/gpu/runtime/device_buffer.h"
#include "backend/gpu/runtime/device_context.h"
#include "backend/gpu/quant/activation_copies.h"
#include "formats/dtype.h"
#include "model/batch.h"

namespace rf::gpu::test {

class GpuTest : public ::testing::Test {
 protected:
  // Skips with the runtime's reason when this build's backend finds no device.
  void SetUp() override;

  std::vector<float> random_floats(std::size_t n, float lo = -1.0f, float hi = 1.0f);
  // The bytes of a rows x cols matrix stored as `type` (in the device's layout) for the benchmarks:
  // 256 random rows encoded once and repeated, since quantizing millions of weights takes long.
  std::vector<std::uint8_t> tiled_matrix(DType type, std::size_t rows, std::size_t cols);
  int random_int(int lo, int hi);  // in [lo, hi]
  // Device 0's context, made for each test.
  DeviceContext& ctx() { return *ctx_; }
  void synchronize() { ctx_->synchronize(); }

 private:
  std::mt19937_64 rng_;
  std::optional<DeviceContext> ctx_;
};

// A decode step for the GpuForward tests: sequence s (for s in `active`) brings tokens[s] at
// `position`, its block table blocks [s * blocks_per_sequence, +blocks_per_sequence).
Batch decode_batch(const std::vector<int>& active, const std::vector<std::int32_t>& tokens, int position,
                   int blocks_per_sequence);

// Prints max |out - ref| and the relative error ||out - ref|| / ||ref|| against `tolerance`, and fails
// if the relative error exceeds it or any output is not finite (a poisoned element nobody wrote).
void expect_close(const std::string& what, const std::vector<float>& out, const std::vector<double>& ref,
                  double tolerance);
void expect_close(const std::string& what, const std::vector<float>& out, const std::vector<float>& ref,
                  double tolerance);

// The values' bits, for checks that two paths agree exactly (where == would let -0 equal +0).
std::vector<std::uint32_t> bits(const std::vector<float>& values);

// `rows` rows of `cols` values stored as `type` (rf::cpu::quantize_row) in the device's layout
// (backend/gpu/device_layout.h), and what they decode to.
struct EncodedRows {
  std::vector<std::uint8_t> bytes;
  std::vector<float> decoded;
};
EncodedRows encode_rows(DType type, const std::vector<float>& values, std::size_t rows, std::size_t cols);

// W x in double from the decoded weights, for one vector x of `cols` values.
std::vector<double> reference_product(const EncodedRows& w, std::size_t rows, std::size_t cols, const std::vector<float>& x);

// Values rounded to int8 as QuantizedActivations (backend/gpu/quant/activation_copies.h) describes:
// codes, each block of 32's scale and code sum, and what the codes stand for (scale * code).
// round_to_int8 is the host reference of the GPU's rounding; RoundedBuffer holds the GPU's.
struct RoundedValues {
  std::vector<std::int8_t> codes;
  std::vector<float> scales;
  std::vector<std::int32_t> code_sums;
  std::vector<float> values;
};
RoundedValues round_to_int8(const std::vector<float>& x);  // x.size() a multiple of 32

// Fails unless the codes, scales and sums are the same, bit for bit.
void expect_same_rounding(const std::string& what, const RoundedValues& got, const RoundedValues& want);

class RoundedBuffer {
 public:
  RoundedBuffer(std::size_t tokens, std::size_t cols);
  QuantizedActivations view() { return view_; }
  RoundedValues download() const;
  void poison() { storage_.poison(); }

 private:
  std::size_t values_;
  DeviceBuffer<std::uint8_t> storage_;
  QuantizedActivations view_;
};

}  // namespace rf::gpu::test
