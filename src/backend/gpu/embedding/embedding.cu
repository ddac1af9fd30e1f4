// Embedding lookup: each token's row of the table, decoded to fp32.
#include "backend/gpu/quant/dequantize_values.cuh"
#include "backend/gpu/common/dependent_launch.cuh"
#include "backend/gpu/runtime/launch_check.h"
#include "backend/gpu/embedding/embedding.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;

// One block per token.
template <class D>
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const std::uint8_t* table, std::size_t row_bytes, int cols, int slices,
                     const std::int32_t* tokens, const std::int32_t* previous, float scale, float* out) {
  begin_dependent();
  std::int32_t token = tokens[blockIdx.x];
  if (token < 0 && previous) token = previous[-1 - token];
  const std::uint8_t* row = table + static_cast<std::size_t>(token) * row_bytes;
  float* out_row = out + static_cast<std::size_t>(blockIdx.x) * cols;
  for (int s = threadIdx.x; s < slices; s += kThreads) {
    typename D::Slice slice;
    D::decode(row, cols / D::kBlockElems, s, slice);
#pragma unroll
    for (int r = 0; r < D::kRuns; ++r) {
#pragma unroll
      for (int i = 0; i < D::kRunLength; ++i) out_row[slice.column[r] + i] = slice_value<D>(slice, r, i) * scale;
    }
  }
  if constexpr (D::kPlain) {
    const int first_tail = slices / D::kSlicesPerBlock * D::kBlockElems;
    for (int c = first_tail + threadIdx.x; c < cols; c += kThreads) out_row[c] = D::value(row, c) * scale;
  }
}

}  // namespace

void launch_embedding(const WeightMatrix& table, const std::int32_t* tokens, int n_tokens, float* out,
                      const DeviceContext& ctx, const std::int32_t* previous, float scale) {
  require(n_tokens >= 0 && table.cols > 0, "launch_embedding", "empty table or negative token count");
  if (n_tokens == 0) return;
  with_decoder(table.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    const int cols = static_cast<int>(table.cols);
    const int slices = decodable_slices<D>(table.data, cols, "launch_embedding");
    launch_dependent(embedding_kernel<D>, n_tokens, kThreads, 0, ctx, static_cast<const std::uint8_t*>(table.data),
                     row_bytes(table.dtype, table.cols), cols, slices, tokens, previous, scale, out);
  });
}

}  // namespace rf::gpu
