// launch_gemm on HIP, where Debian 12's ROCm has no hipBLAS or rocBLAS to glue to: the project's tiled
// kernel (gemm_tiled.cu).
#include "backend/gpu/gemm/gemm.h"
#include "backend/gpu/gemm/gemm_kernels.h"

namespace rf::gpu {

// The tiled kernel keeps nothing per device.
class GemmContext {};

std::unique_ptr<GemmContext> make_gemm_context(const DeviceContext&) { return std::make_unique<GemmContext>(); }

bool gemm_takes_half_copy() { return false; }

bool gemm_multiplies_rounded(DType, int) { return false; }

void launch_gemm_group(const DeviceContext& ctx, std::span<const WeightProduct> products, const float* x, int n_tokens,
                       HalfCopy, QuantizedActivations) {
  check_gemm_group(products, n_tokens);
  for (const WeightProduct& p : products) launch_gemm_tiled(p.w, x, n_tokens, p.out, ctx);
}

}  // namespace rf::gpu

void std::default_delete<rf::gpu::GemmContext>::operator()(rf::gpu::GemmContext* ctx) const { delete ctx; }
