#pragma once
// Between gemv.cu, which checks a launch and settles what does not depend on the weights' type, and
// the kernels of each type (gemv_kernel.cuh). Each gemv_<types>.cu instantiates launch_typed for its
// types, so that the kernels of different types compile in parallel: one file held them all and was a
// build's longest step by minutes (docs/hardening.md, "CI's time").
#include <cstddef>
#include <cstdint>

#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/runtime/device_context.h"

namespace rf::gpu::gemv_detail {

inline constexpr int kMaxSegments = 3;

// Rows [0, rows) of one product go to the blocks from first_block on, kRowsPerBlock rows each; token
// t's output is y[t * rows, +rows). With two matrices (gate, up), each output is
// swiglu(w[0] row . x, w[1] row . x).
struct Segment {
  const std::uint8_t* w[2];
  float* y;
  int rows;
  int first_block;
};

// Expert products (ExpertProducts): null `active` for a dense product.
struct ExpertArgs {
  const std::int32_t* active = nullptr;
  const std::int32_t* begin = nullptr;
  const std::int32_t* x_row = nullptr;
  std::size_t stride = 0;
};

struct GemvArgs {
  Segment segments[kMaxSegments];
  int n_segments;
  std::size_t row_bytes;
  int cols;
  int slices;  // per row, decoded by D::decode; plain types read columns past them by D::value
  const float* x;  // token t's vector at x + t * cols
  QuantizedActivations rounded;  // the integer path's x
  RmsNormOf norm;                // folded into the product where it has a weight (one token)
  bool accumulate;               // y += W x
  int n_tokens;                  // expert products: the most entries of an expert
  ExpertArgs experts;
};

// A checked launch: the kernel's arguments but for `slices` (the type's), and how to pick its kernel.
struct GemvLaunch {
  GemvArgs args;
  bool integer;               // x's int8 copy is multiplied (the weights' type reads it)
  bool fixed_order;           // GemvInput::fixed_order
  bool after_wide_attention;  // GemvInput::after_wide_attention
  const ExpertProducts* experts;
  const char* name;
};

// Launches the products of `launch` with weights decoded by D (a Decoder<type>), kMats matrices each.
template <class D, int kMats>
void launch_typed(GemvLaunch launch, const DeviceContext& ctx);

}  // namespace rf::gpu::gemv_detail
