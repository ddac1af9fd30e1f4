#include "backend/cpu/matmul.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "backend/cpu/kernel_table.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace rf::cpu {

namespace {

// Decode (one token): enough columns per parallel chunk that waking a worker pays off.
constexpr std::size_t kMinChunkElems = 1 << 15;

// Prefill: rows are decoded to fp32 a tile at a time, kChunkCols columns per pass, and every token
// runs against the tile while it sits in L2. kTileRows is a multiple of the micro-kernels' rows
// (3 and 2), kChunkCols of every block size.
constexpr std::size_t kTileRows = 24;
constexpr std::size_t kChunkCols = 1024;
// Rows of the tile and of x are one cache line longer than needed: at a power-of-two stride they
// would all compete for the same L1 sets.
constexpr std::size_t kPad = 16;
constexpr std::size_t kPaddedChunk = kChunkCols + kPad;
constexpr std::size_t kKeptFloats = std::size_t{24} << 20;

const std::byte* row_ptr(const WeightMatrix& w, std::size_t r) {
  return static_cast<const std::byte*>(w.data) + r * row_bytes(w.dtype, w.cols);
}

void matvec(const WeightMatrix& w, const float* x, float* out, ThreadPool& pool) {
  const auto dot = kernels().dot[static_cast<std::size_t>(w.dtype)];
  pool.parallel_for(w.rows, std::max<std::size_t>(1, kMinChunkElems / w.cols), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) out[r] = dot(row_ptr(w, r), x, w.cols);
  });
}

// Rows [r0, r0 + n_rows) against all tokens; x rows are x_stride apart.
void matmul_tile(const WeightMatrix& w, const float* x, std::size_t x_stride, std::size_t n_tokens, float* out,
                 std::size_t r0, std::size_t n_rows, float* scratch) {
  const KernelTable& k = kernels();
  const auto dequantize = k.dequantize[static_cast<std::size_t>(w.dtype)];
  for (std::size_t c0 = 0; c0 < w.cols; c0 += kChunkCols) {
    const std::size_t n_cols = std::min(kChunkCols, w.cols - c0);
    const std::size_t offset = row_bytes(w.dtype, c0);
    for (std::size_t r = 0; r < n_rows; ++r) {
      dequantize(row_ptr(w, r0 + r) + offset, scratch + r * kPaddedChunk, n_cols);
    }
    k.gemm({.w = scratch,
            .w_stride = kPaddedChunk,
            .rows = n_rows,
            .x = x + c0,
            .x_stride = x_stride,
            .tokens = n_tokens,
            .k = n_cols,
            .out = out + r0,
            .out_stride = w.rows,
            .accumulate = c0 > 0});
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, std::size_t n_tokens, float* out, ThreadPool& pool) {
  const std::size_t block = dtype_info(w.dtype).block_elems;
  if (w.cols % block != 0) {
    fail("matmul: {} weights need a multiple of {} columns, got {}", dtype_name(w.dtype), block, w.cols);
  }
  if (n_tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(out, out + n_tokens * w.rows, 0.0f);
    return;
  }
  if (n_tokens == 1) {
    matvec(w, x, out, pool);
    return;
  }
  // A padded copy of x, for the same reason as the scratch rows. Kept between calls up to kKeptFloats
  // (attention's bands of scores, image_ops.cpp): a fresh one of tens of MiB would cost more in page
  // faults than the copy; larger ones (long prefills) go back when done.
  const std::size_t x_stride = w.cols + kPad;
  thread_local std::vector<float> kept;
  std::vector<float> transient;
  std::vector<float>& padded = n_tokens * x_stride <= kKeptFloats ? kept : transient;
  padded.resize(std::max(padded.size(), n_tokens * x_stride));
  float* const xp = padded.data();  // the workers' own `kept` is another
  for (std::size_t t = 0; t < n_tokens; ++t) {
    std::copy_n(x + t * w.cols, w.cols, xp + t * x_stride);
    std::fill_n(xp + t * x_stride + w.cols, kPad, 0.0f);
  }
  const std::size_t tiles = (w.rows + kTileRows - 1) / kTileRows;
  pool.parallel_for(tiles, 1, [&](std::size_t begin, std::size_t end) {
    std::vector<float> scratch(kTileRows * kPaddedChunk);
    for (std::size_t t = begin; t < end; ++t) {
      const std::size_t r0 = t * kTileRows;
      matmul_tile(w, xp, x_stride, n_tokens, out, r0, std::min(kTileRows, w.rows - r0), scratch.data());
    }
  });
}

}  // namespace rf::cpu
