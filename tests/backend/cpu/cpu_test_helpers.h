#pragma once
// Shared by the CPU kernel tests: random rows of every type, double-precision references, and
// running a test under each instruction set this CPU supports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/block_formats.h"
#include "backend/cpu/kernel_table.h"
#include "backend/cpu/quant.h"
#include "formats/dtype.h"
#include "util/half.h"

namespace rf::test {

inline const std::vector<DType> kAllDTypes(std::begin(kWeightDTypes), std::end(kWeightDTypes));
inline std::vector<DType> quantized_dtypes() {
  std::vector<DType> types;
  for (DType t : kAllDTypes) {
    if (is_quantized(t)) types.push_back(t);
  }
  return types;
}

inline std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas{cpu::Isa::Scalar};
  if (cpu::isa_supported(cpu::Isa::Avx2)) isas.push_back(cpu::Isa::Avx2);
  return isas;
}

inline std::string isa_name(cpu::Isa isa) { return isa == cpu::Isa::Avx2 ? "avx2" : "scalar"; }

// Selects an instruction set for the scope's lifetime.
class IsaScope {
 public:
  explicit IsaScope(cpu::Isa isa) : previous_(cpu::active_isa()) { cpu::set_isa(isa); }
  ~IsaScope() { cpu::set_isa(previous_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  cpu::Isa previous_;
};

// Fresh inputs every run; tests put seed() in a SCOPED_TRACE so a failure can be replayed.
class Rng {
 public:
  Rng() : seed_(std::random_device{}()), gen_(seed_) {}
  std::uint32_t seed() const { return seed_; }
  std::string trace() const { return "random seed " + std::to_string(seed_); }

  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  std::uint32_t bits() { return gen_(); }

  std::vector<float> normal(std::size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = normal();
    return v;
  }

  // Weight-like data: gaussian, with a magnitude that changes every 32 elements (so blocks see
  // different scales) and an occasional outlier.
  std::vector<float> weights(std::size_t n) {
    std::vector<float> v(n);
    float scale = 1.0f;
    for (std::size_t i = 0; i < n; ++i) {
      if (i % 32 == 0) scale = std::exp(uniform(-3.0f, 1.0f));
      v[i] = scale * normal() * (bits() % 97 == 0 ? 6.0f : 1.0f);
    }
    return v;
  }

 private:
  std::uint32_t seed_;
  std::mt19937 gen_;
};

inline std::vector<std::uint8_t> quantized(DType type, const std::vector<float>& x) {
  std::vector<std::uint8_t> row(row_bytes(type, x.size()));
  cpu::quantize_row(type, x.data(), row.data(), x.size());
  return row;
}

inline std::vector<float> dequantized(DType type, const std::vector<std::uint8_t>& row, std::size_t n) {
  std::vector<float> x(n);
  cpu::dequantize_row(type, row.data(), x.data(), n);
  return x;
}

// A row of random bits, except that the f16 scales are random normal numbers of moderate size:
// reaches level and scale patterns that the quantizer seldom writes (high 6-bit scales and mins).
inline std::vector<std::uint8_t> random_bits_row(DType type, std::size_t n, Rng& rng) {
  if (!is_quantized(type)) return quantized(type, rng.normal(n));
  std::vector<std::uint8_t> row(row_bytes(type, n));
  for (auto& b : row) b = static_cast<std::uint8_t>(rng.bits());
  auto scale = [&] { return f32_to_f16(rng.uniform(-0.05f, 0.05f)); };
  const std::size_t blocks = n / dtype_info(type).block_elems;
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint8_t* p = row.data() + b * dtype_info(type).block_bytes;
    switch (type) {
      case DType::Q8_0: reinterpret_cast<cpu::BlockQ8_0*>(p)->d = scale(); break;
      case DType::Q4_0: reinterpret_cast<cpu::BlockQ4_0*>(p)->d = scale(); break;
      case DType::Q4_K:
        reinterpret_cast<cpu::BlockQ4_K*>(p)->d = scale();
        reinterpret_cast<cpu::BlockQ4_K*>(p)->dmin = scale();
        break;
      case DType::Q6_K: reinterpret_cast<cpu::BlockQ6_K*>(p)->d = scale(); break;
      case DType::Q4_1:
        reinterpret_cast<cpu::BlockQ4_1*>(p)->d = scale();
        reinterpret_cast<cpu::BlockQ4_1*>(p)->m = scale();
        break;
      case DType::Q5_0: reinterpret_cast<cpu::BlockQ5_0*>(p)->d = scale(); break;
      case DType::Q5_1:
        reinterpret_cast<cpu::BlockQ5_1*>(p)->d = scale();
        reinterpret_cast<cpu::BlockQ5_1*>(p)->m = scale();
        break;
      case DType::Q2_K:
        reinterpret_cast<cpu::BlockQ2_K*>(p)->d = scale();
        reinterpret_cast<cpu::BlockQ2_K*>(p)->dmin = scale();
        break;
      case DType::Q3_K: reinterpret_cast<cpu::BlockQ3_K*>(p)->d = scale(); break;
      case DType::Q5_K:
        reinterpret_cast<cpu::BlockQ5_K*>(p)->d = scale();
        reinterpret_cast<cpu::BlockQ5_K*>(p)->dmin = scale();
        break;
      case DType::IQ4_NL: reinterpret_cast<cpu::BlockIQ4_NL*>(p)->d = scale(); break;
      case DType::IQ4_XS: reinterpret_cast<cpu::BlockIQ4_XS*>(p)->d = scale(); break;
      default: break;
    }
  }
  return row;
}

inline double dot_double(const float* a, const float* b, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// sum |a_i b_i|: fp32 rounding errors of a dot product scale with this, not with the result,
// which cancellation can make arbitrarily small.
inline double abs_dot(const float* a, const float* b, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(a[i]) * b[i]);
  return s;
}

}  // namespace rf::test
