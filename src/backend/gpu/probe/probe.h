#pragma once
// Measured ceilings of this GPU, the denominators of the benchmark's bounds (medians of runs).
#include "backend/gpu/gemm/gemm.h"

namespace rf::gpu {

// Bytes per second a read-only kernel streams from a buffer far larger than the L2 cache.
double measure_read_bandwidth(const DeviceContext& ctx);

// Flop/s of launch_gemm on a large product with bf16 weights (cuBLAS's bf16 GEMM on CUDA, the tiled
// kernel on HIP): what prefill's projections can reach.
double measure_matmul_flops(const DeviceContext& ctx);

}  // namespace rf::gpu
