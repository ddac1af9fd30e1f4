// CudnnConvolutions (conv.h) where the build has no cuDNN: HIP, or CUDA without it installed.
#include "backend/gpu/conv/conv.h"

namespace rf::gpu {

std::unique_ptr<CudnnConvolutions> CudnnConvolutions::create(const DeviceContext&) { return nullptr; }

}  // namespace rf::gpu
