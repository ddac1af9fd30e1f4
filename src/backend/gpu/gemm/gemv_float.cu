// The decode GEMV's kernels for f32, f16 and bf16 weights (see gemv_launch.h).
#include "backend/gpu/gemm/gemv_kernel.cuh"

namespace rf::gpu::gemv_detail {

template void launch_typed<Decoder<DType::F32>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::F32>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::F16>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::F16>, 2>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::BF16>, 1>(GemvLaunch, const DeviceContext&);
template void launch_typed<Decoder<DType::BF16>, 2>(GemvLaunch, const DeviceContext&);

}  // namespace rf::gpu::gemv_detail
