#pragma once
// Weights decoded to values, as the GEMM operand loads want them (the GEMV instead folds each run's
// scale and bias into its sums): shared by the tiled kernel, the 16-bit conversion for cuBLAS and the
// embedding lookup.
#include "backend/gpu/quant/dequantize.cuh"

namespace rf::gpu {

// Element i of run `run` of a decoded slice.
template <class D>
__device__ __forceinline__ float slice_value(const typename D::Slice& s, int run, int i) {
  if constexpr (D::kHasBias) return s.scale[run] * s.q[run][i] + s.bias[run];
  return s.scale[run] * s.q[run][i];
}

// The fewest columns that consecutive slices cover exactly, with none outside: a column range that
// starts and ends at multiples of it is decoded by whole slices. Q4_K's, Q5_K's and Q6_K's slices are
// their device layout's units of 32 columns; Q3_K's and Q2_K's interleave over half a block, IQ4_XS's
// are one sub-block each.
template <class D>
inline constexpr int kSliceGroupCols = D::kPlain ? D::kRunLength : D::kBlockElems;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::Q4_K>> = 32;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::Q6_K>> = 32;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::Q5_K>> = 32;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::Q3_K>> = 128;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::Q2_K>> = 128;
template <>
inline constexpr int kSliceGroupCols<Decoder<DType::IQ4_XS>> = 32;

}  // namespace rf::gpu
