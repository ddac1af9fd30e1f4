#pragma once
// Run-time selection between the kernel sets compiled for different instruction sets. Each set is
// a table of plain function pointers built from the templates in kernel_templates.h.
#include <algorithm>
#include <array>
#include <iterator>
#include <cstddef>

#include "formats/dtype.h"

namespace rf::cpu {

// The weight types, which come first in DType: F64 is the first of the others.
inline constexpr std::size_t kNumDTypes = static_cast<std::size_t>(DType::F64);
static_assert(std::ranges::all_of(kWeightDTypes, [](DType t) { return static_cast<std::size_t>(t) < kNumDTypes; }));
static_assert(std::size(kWeightDTypes) == kNumDTypes);

// out[t * out_stride + r] (+)= sum_{c < k} w[r * w_stride + c] * x[t * x_stride + c]
// for r < rows, t < tokens; `accumulate` adds to out instead of overwriting it.
struct GemmTile {
  const float* w;
  std::size_t w_stride;
  std::size_t rows;
  const float* x;
  std::size_t x_stride;
  std::size_t tokens;
  std::size_t k;
  float* out;
  std::size_t out_stride;
  bool accumulate;
};

struct KernelTable {
  using Dequantize = void (*)(const void* src, float* dst, std::size_t n);
  using Dot = float (*)(const void* row, const float* x, std::size_t n);
  std::array<Dequantize, kNumDTypes> dequantize;  // indexed by DType
  std::array<Dot, kNumDTypes> dot;
  void (*gemm)(const GemmTile& tile);
};

enum class Isa { Scalar, Avx2 };  // Avx2 also requires FMA and F16C

// The table for the selected instruction set: the best one this CPU supports unless set_isa chose.
const KernelTable& kernels();

bool isa_supported(Isa isa);
Isa active_isa();
// For tests and benchmarks comparing the paths; throws rf::Error when `isa` is unsupported.
void set_isa(Isa isa);

// Defined by kernels_scalar.cpp and kernels_avx2.cpp; the AVX2 one is null when not compiled in.
const KernelTable& scalar_kernel_table();
const KernelTable* avx2_kernel_table();

}  // namespace rf::cpu
