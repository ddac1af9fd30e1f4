#pragma once
#include <cstddef>

#include "formats/dtype.h"

namespace rf {

// A row-major weight matrix in its stored type: `rows` output features, each a row of `cols`
// inputs (rows are row_bytes(dtype, cols) apart). `data` points into host memory (usually a
// file's memory map) or, for a GPU backend's copy, into device memory.
struct WeightMatrix {
  DType dtype;
  std::size_t rows;
  std::size_t cols;
  const void* data;

  // The bytes `data` holds.
  std::size_t bytes() const { return rows * row_bytes(dtype, cols); }
};

}  // namespace rf
