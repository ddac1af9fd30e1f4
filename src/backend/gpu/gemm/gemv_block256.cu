// The decode GEMV's kernels for Q2_K, Q3_K and IQ4_XS weights, decoded to fp32 (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::Q2_K>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q2_K>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q3_K>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q3_K>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::IQ4_XS>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::IQ4_XS>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
