#pragma once
// Conversions between fp32 and the stored weight types, row by row. The dequantizers are the
// reference that every quantized kernel (CPU and GPU) is tested against.
#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace rf::cpu {

// dst[0..n) = src row decoded; n must be a multiple of the type's block size.
void dequantize_row(DType type, const void* src, float* dst, std::size_t n);

// Encodes n floats into `type` (row_bytes(type, n) bytes at dst); n a multiple of the block size.
// The K-quant encoders search scales per sub-block as llama.cpp's reference quantizer does.
void quantize_row(DType type, const float* src, void* dst, std::size_t n);

// sum_i decode(row)[i] * x[i], without materialising the decoded row.
float dot_row(DType type, const void* row, const float* x, std::size_t n);

}  // namespace rf::cpu
