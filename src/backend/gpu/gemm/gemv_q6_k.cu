// The decode GEMV's kernels for Q6_K weights (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::Q6_K>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q6_K>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
