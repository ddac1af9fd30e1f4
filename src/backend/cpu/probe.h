#pragma once
// Measured ceilings of this CPU, the denominators of the benchmark's bounds.
namespace rf {
class ThreadPool;
}

namespace rf::cpu {

// Bytes per second when all threads stream-read a buffer far larger than the caches (median of runs).
double measure_read_bandwidth(ThreadPool& pool);

// Flop/s of rocmforge's own bf16-weight matmul on a product with many tokens (median of runs): there is no vendor
// BLAS on the CPU path, so this is the ceiling prefill can reach here.
double measure_matmul_flops(ThreadPool& pool);

}  // namespace rf::cpu
