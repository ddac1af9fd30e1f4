// The decode GEMV's kernels for Q4_K and Q5_K weights (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::Q4_K>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q4_K>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_K>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_K>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
