// The decode GEMV's kernels for Q4_0 and Q8_0 weights (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::Q4_0>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q4_0>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q8_0>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q8_0>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
