#pragma once
// Matrix products of stored weights with fp32 activations, the CPU's hot path.
// Weights stay in their stored type (any of formats/dtype.h's kWeightDTypes) and are converted
// inside the kernel; accumulation is fp32.
#include <cstddef>

#include "formats/weight_matrix.h"

namespace rf {
class ThreadPool;
}

namespace rf::cpu {

using rf::WeightMatrix;

// out[t * rows + r] = sum_c W[r][c] * x[t * cols + c] for t < n_tokens.
void matmul(const WeightMatrix& w, const float* x, std::size_t n_tokens, float* out, ThreadPool& pool);

}  // namespace rf::cpu
