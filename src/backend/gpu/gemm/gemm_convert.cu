// The 16-bit operands of cuBLAS's tensor-core GEMM (CUDA builds): activations rounded, quantized weights
// decoded.
#include <algorithm>

#include "backend/gpu/quant/dequantize_values.cuh"
#include "backend/gpu/gemm/gemm_kernels.h"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = std::size_t{1} << 16;  // then each thread strides over the rest

template <bool kBf16>
__global__ void __launch_bounds__(kThreads) round_kernel(const float* x, std::size_t n, std::uint16_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < n; i += stride) {
    out[i] = float_to_16bit(x[i], kBf16);
  }
}

// One slice per thread, its runs written as f16.
template <class D>
__global__ void __launch_bounds__(kThreads)
    decode_f16_kernel(const std::uint8_t* w, std::size_t row_bytes, int cols, int row_slices, std::size_t slices,
                       std::uint16_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < slices; i += stride) {
    const std::size_t row = i / row_slices;
    typename D::Slice slice;
    D::decode(w + row * row_bytes, cols / D::kBlockElems, static_cast<int>(i % row_slices), slice);
    std::uint16_t* out_row = out + row * cols;
#pragma unroll
    for (int run = 0; run < D::kRuns; ++run) {
      if constexpr (D::kRunLength % 8 == 0) {
        // 16-byte stores: runs start at multiples of 8 columns in rows of whole blocks.
#pragma unroll
        for (int e = 0; e < D::kRunLength; e += 8) {
          std::uint32_t packed[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            packed[j] = float_to_half_bits(slice_value<D>(slice, run, e + 2 * j)) |
                        static_cast<std::uint32_t>(float_to_half_bits(slice_value<D>(slice, run, e + 2 * j + 1))) << 16;
          }
          *reinterpret_cast<uint4*>(out_row + slice.column[run] + e) = {packed[0], packed[1], packed[2], packed[3]};
        }
      } else {
#pragma unroll
        for (int e = 0; e < D::kRunLength; ++e) out_row[slice.column[run] + e] = float_to_half_bits(slice_value<D>(slice, run, e));
      }
    }
  }
}

unsigned grid_for(std::size_t items) {
  return static_cast<unsigned>(std::min((items + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

void launch_round_to_16bit(const float* x, std::size_t n, DType type, std::uint16_t* out, const DeviceContext& ctx) {
  require(type == DType::F16 || type == DType::BF16, "launch_round_to_16bit", "type must be f16 or bf16");
  if (n == 0) return;
  if (type == DType::BF16) {
    launch_kernel(round_kernel<true>, grid_for(n), kThreads, 0, ctx.stream(), x, n, out);
  } else {
    launch_kernel(round_kernel<false>, grid_for(n), kThreads, 0, ctx.stream(), x, n, out);
  }
  RF_GPU_CHECK_LAUNCH();
}

void launch_decode_to_f16(const WeightMatrix& w, std::uint16_t* out, const DeviceContext& ctx) {
  require(is_quantized(w.dtype), "launch_decode_to_f16", "weights are not quantized");
  require(w.rows > 0 && w.cols > 0 && w.rows <= (1u << 30) && w.cols <= (1u << 30), "launch_decode_to_f16",
          "weight shape is empty or too large");
  with_decoder(w.dtype, [&](auto decoder) {
    using D = decltype(decoder);
    const int row_slices = decodable_slices<D>(w.data, static_cast<int>(w.cols), "launch_decode_to_f16");
    const std::size_t slices = w.rows * row_slices;
    launch_kernel(decode_f16_kernel<D>, grid_for(slices), kThreads, 0, ctx.stream(), static_cast<const std::uint8_t*>(w.data),
                                                                     row_bytes(w.dtype, w.cols),
                                                                     static_cast<int>(w.cols), row_slices, slices, out);
    RF_GPU_CHECK_LAUNCH();
  });
}

}  // namespace rf::gpu
