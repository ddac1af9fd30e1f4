// The decode GEMV's kernels for Q4_1, Q5_0, Q5_1 and IQ4_NL weights, decoded to fp32 (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::Q4_1>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q4_1>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_0>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_0>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_1>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::Q5_1>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::IQ4_NL>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::IQ4_NL>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
