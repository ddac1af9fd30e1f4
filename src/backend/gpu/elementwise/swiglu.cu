// The gated MLP's product: act(gate) * up, elementwise (SwiGLU, GeGLU).
#include <algorithm>

#include "backend/gpu/elementwise/activation.cuh"
#include "backend/gpu/quant/activation_copies.h"
#include "backend/gpu/elementwise/elementwise.h"

namespace rf::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 4096;  // enough to fill any current GPU; threads then stride

// Output i is row i / width's column i % width; gate's and up's rows lie row_stride apart (where they
// are packed, width == row_stride, and i is the index itself: no 64-bit division per element).
__global__ void __launch_bounds__(kThreads) glu_kernel(const float* gate, const float* up, std::size_t n, std::size_t width,
                                                       std::size_t row_stride, MlpActivation act, float* out,
                                                       HalfCopy half) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  const bool bf16 = half.type == DType::BF16;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const std::size_t from = width == row_stride ? i : i / width * row_stride + i % width;
    const float v = glu(gate[from], up[from], act);
    if (out) out[i] = v;
    if (half.data) half.data[i] = float_to_16bit(v, bf16);
  }
}

// A stacked product's rows of a width that is a multiple of 4, four values a thread: row blockIdx.y,
// values 4v .. 4v + 3 of it, read as one float4 of gate and one of up and written as 8 bytes: faster
// than the loop above, whose index takes a 64-bit division per value (measured on batch 32 of Llama 3
// 8B: docs/perf_history.md, v11).
__global__ void __launch_bounds__(kThreads) swiglu_stacked_kernel(const float* gate_up, int width, HalfCopy out) {
  const int v = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (4 * v >= width) return;
  const std::size_t row = blockIdx.y;
  const float4 g = reinterpret_cast<const float4*>(gate_up + 2 * row * width)[v];
  const float4 u = reinterpret_cast<const float4*>(gate_up + (2 * row + 1) * width)[v];
  const bool bf16 = out.type == DType::BF16;
  auto pair = [&](float a, float b) {
    return static_cast<std::uint32_t>(float_to_16bit(a, bf16)) | static_cast<std::uint32_t>(float_to_16bit(b, bf16)) << 16;
  };
  reinterpret_cast<uint2*>(out.data + row * width)[v] =
      make_uint2(pair(swiglu(g.x, u.x), swiglu(g.y, u.y)), pair(swiglu(g.z, u.z), swiglu(g.w, u.w)));
}

void launch_rows(const float* gate, const float* up, std::size_t n, std::size_t width, std::size_t row_stride,
                 MlpActivation act, float* out, HalfCopy half, const DeviceContext& ctx) {
  check_half_copy(half, "launch_glu");
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
  launch_kernel(glu_kernel, blocks, kThreads, 0, ctx.stream(), gate, up, n, width, row_stride, act, out, half);
  RF_GPU_CHECK_LAUNCH();
}

}  // namespace

void launch_glu(const float* gate, const float* up, std::size_t n, MlpActivation act, float* out, const DeviceContext& ctx,
                HalfCopy half) {
  launch_rows(gate, up, n, n, n, act, out, half, ctx);
}

void launch_swiglu_stacked(const float* gate_up, int rows, int width, HalfCopy out, const DeviceContext& ctx) {
  require(rows >= 0 && width > 0 && out.data, "launch_swiglu_stacked", "needs rows of a positive width and a copy to write");
  check_half_copy(out, "launch_swiglu_stacked");
  constexpr int kMaxRows = 65535;  // a grid's y extent
  if (width % 4 == 0 && rows <= kMaxRows && is_aligned(gate_up, 16) && is_aligned(out.data, 8)) {
    if (rows == 0) return;
    const dim3 grid((width / 4 + kThreads - 1) / kThreads, rows);
    launch_kernel(swiglu_stacked_kernel, grid, kThreads, 0, ctx.stream(), gate_up, width, out);
    RF_GPU_CHECK_LAUNCH();
    return;
  }
  const auto w = static_cast<std::size_t>(width);
  launch_rows(gate_up, gate_up + w, static_cast<std::size_t>(rows) * w, w, 2 * w, MlpActivation::Silu, nullptr, out, ctx);
}

}  // namespace rf::gpu
