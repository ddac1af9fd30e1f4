// launch_gemm where CMake found no vendor BLAS (HIP builds without hipBLAS): the project's tiled kernel.
#include "backend/gpu/gemm_kernels.h"
#include "backend/gpu/ops.h"

namespace rf::gpu {

class GemmContext {
 public:
  explicit GemmContext(gpuStream_t stream) : stream(stream) {}
  gpuStream_t stream;
};

std::unique_ptr<GemmContext> make_gemm_context(gpuStream_t stream) { return std::make_unique<GemmContext>(stream); }

bool gemm_takes_half_copy() { return false; }

void launch_gemm_group(GemmContext& ctx, std::span<const WeightProduct> products, const float* x, int n_tokens,
                       HalfCopy) {
  check_gemm_group(products, n_tokens);
  for (const WeightProduct& p : products) launch_gemm_tiled(p.w, x, n_tokens, p.out, ctx.stream);
}

}  // namespace rf::gpu

void std::default_delete<rf::gpu::GemmContext>::operator()(rf::gpu::GemmContext* ctx) const { delete ctx; }
