// The decode GEMV's launches (gemv.h): each checks its products and x, settles what does not depend
// on the weights' type, and hands the launch to that type's kernels (gemv_kernel.cuh, compiled in
// gemv_<types>.cu).
#include <span>

#include "backend/gpu/gemm/gemv.h"
#include "backend/gpu/gemm/gemv_launch.h"
#include "backend/gpu/quant/dequantize.cuh"
#include "backend/gpu/runtime/launch_check.h"

namespace rf::gpu {

namespace {

using gemv_detail::GemvArgs;
using gemv_detail::kMaxSegments;

// One output vector: its matrix (two, gate and up, for the SwiGLU launch).
struct Product {
  const WeightMatrix* w[2];
  float* y;
};

// Checks the products against each other and x, and launches one kernel for all of them; with
// `experts`, one product of each picked expert's matrices.
template <int kMats>
void launch_products(std::span<const Product> products, GemvInput x, int n_tokens, bool accumulate, const DeviceContext& ctx,
                     const char* name, const ExpertProducts* experts = nullptr) {
  require(!products.empty() && products.size() <= kMaxSegments, name, "between 1 and 3 products per launch");
  require(!experts || (products.size() == 1 && !accumulate && !x.norm.weight && experts->active_slots > 0 &&
                       experts->active_slots < 65536),
          name, "expert products: one product, no accumulation or folded norm, and 1 to 65535 expert slots");
  const WeightMatrix& first = *products[0].w[0];
  require(first.rows > 0 && first.cols > 0 && first.cols <= (1u << 30), name, "weight shape is empty or too large");
  require(n_tokens >= 0 && n_tokens <= (1 << 24), name, "bad token count");
  const bool integer = x.rounded.codes && gemv_reads_rounded(first.dtype);
  const bool norm = x.norm.weight != nullptr;
  require(!norm || (n_tokens <= 1 && !integer), name, "a folded norm takes one token, and x in fp32");
  require(!norm || is_aligned(x.norm.weight, 16), name, "the norm's weight must be 16-byte aligned");
  require(integer ? is_aligned(x.rounded.codes, 16) : is_aligned(x.x, 16), name, "x must be 16-byte aligned");
  require(n_tokens <= 1 || first.cols % 4 == 0, name, "each token's x must be 16-byte aligned: columns a multiple of 4");
  if (n_tokens == 0) return;
  gemv_detail::GemvLaunch plan{};
  GemvArgs& args = plan.args;
  args.n_segments = static_cast<int>(products.size());
  args.row_bytes = row_bytes(first.dtype, first.cols);
  args.cols = static_cast<int>(first.cols);
  args.x = x.x;
  args.rounded = x.rounded;
  args.norm = x.norm;
  args.accumulate = accumulate;
  args.n_tokens = n_tokens;
  if (experts) args.experts = {experts->active, experts->begin, experts->x_row, experts->stride};
  for (std::size_t i = 0; i < products.size(); ++i) {
    gemv_detail::Segment& seg = args.segments[i];
    for (int m = 0; m < kMats; ++m) {
      const WeightMatrix& w = *products[i].w[m];
      require(w.dtype == first.dtype && w.cols == first.cols, name, "products of one launch must share type and columns");
      require(w.rows == products[i].w[0]->rows && w.rows > 0 && w.rows <= (1u << 30), name, "bad row count");
      seg.w[m] = static_cast<const std::uint8_t*>(w.data);
    }
    seg.y = products[i].y;
    seg.rows = static_cast<int>(products[i].w[0]->rows);
  }
  plan.integer = integer;
  plan.fixed_order = x.fixed_order;
  plan.after_wide_attention = x.after_wide_attention;
  plan.experts = experts;
  plan.name = name;
  with_decoder(first.dtype, [&](auto decoder) { gemv_detail::launch_typed<decltype(decoder), kMats>(plan, ctx); });
}

}  // namespace

bool gemv_reads_rounded(DType type) {
  bool integer = false;
  with_decoder(type, [&](auto decoder) { integer = decltype(decoder)::kIntegerDot; });
  return integer;
}

void launch_gemv(const WeightMatrix& w, GemvInput x, int n_tokens, float* y, const DeviceContext& ctx, bool accumulate) {
  const Product product{{&w, nullptr}, y};
  launch_products<1>(std::span(&product, 1), x, n_tokens, accumulate, ctx, "launch_gemv");
}

void launch_gemv_group(std::span<const WeightProduct> group, GemvInput x, int n_tokens, const DeviceContext& ctx) {
  Product products[kMaxSegments];
  require(group.size() <= kMaxSegments, "launch_gemv_group", "at most 3 products per launch");
  for (std::size_t i = 0; i < group.size(); ++i) products[i] = {{&group[i].w, nullptr}, group[i].out};
  launch_products<1>(std::span(products, group.size()), x, n_tokens, false, ctx, "launch_gemv_group");
}

void launch_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, GemvInput x, int n_tokens, float* out,
                        const DeviceContext& ctx) {
  const Product product{{&gate, &up}, out};
  launch_products<2>(std::span(&product, 1), x, n_tokens, false, ctx, "launch_gemv_swiglu");
}

void launch_expert_gemv(const WeightMatrix& w, const ExpertProducts& experts, GemvInput x, float* y,
                        const DeviceContext& ctx) {
  const Product product{{&w, nullptr}, y};
  launch_products<1>(std::span(&product, 1), x, experts.most_entries, false, ctx, "launch_expert_gemv", &experts);
}

void launch_expert_gemv_swiglu(const WeightMatrix& gate, const WeightMatrix& up, const ExpertProducts& experts,
                               GemvInput x, float* y, const DeviceContext& ctx) {
  const Product product{{&gate, &up}, y};
  launch_products<2>(std::span(&product, 1), x, experts.most_entries, false, ctx, "launch_expert_gemv_swiglu", &experts);
}

}  // namespace rf::gpu
