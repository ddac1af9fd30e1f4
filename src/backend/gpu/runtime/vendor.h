#pragma once
// The one place where CUDA and HIP differ by name. Kernels and host code use the gpu* names and
// RF_* macros below; the build defines ROCMFORGE_GPU_CUDA (nvcc) or ROCMFORGE_GPU_HIP (ROCm clang, or
// the host compiler against ROCm's HIP CPU runtime, which then defines __HIP_CPU_RT__: the hip-cpu
// preset, a test of the HIP path on the CPU with 64-wide wavefronts).
// The host half is plain C++ (included by .cpp files too); the device half is compiled only by the
// GPU compilers.

#if defined(ROCMFORGE_GPU_CUDA)
#include <cuda_runtime_api.h>

using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuDeviceProp = cudaDeviceProp;
using gpuDeviceAttribute = cudaDeviceAttr;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr gpuError_t gpuErrorOutOfMemory = cudaErrorMemoryAllocation;
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
inline constexpr gpuError_t gpuErrorPeerAccessAlreadyEnabled = cudaErrorPeerAccessAlreadyEnabled;
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define gpuDevAttrWarpSize cudaDevAttrWarpSize
#define gpuDevAttrComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define gpuDevAttrSharedPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemGetInfo cudaMemGetInfo
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemset cudaMemset
#define gpuMemsetAsync cudaMemsetAsync
#define gpuStreamCreate cudaStreamCreate
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEvent_t cudaEvent_t
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuHostAlloc cudaHostAlloc  // (pointer, bytes, flags): flags 0 on both
#define gpuFreeHost cudaFreeHost
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy

#elif defined(ROCMFORGE_GPU_HIP)
#include <hip/hip_runtime_api.h>
#if defined(__HIP_CPU_RT__)
#include "backend/gpu/runtime/hip_cpu_compat.h"  // what HIP-CPU leaves out of HIP
#endif

using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuDeviceProp = hipDeviceProp_t;
using gpuDeviceAttribute = hipDeviceAttribute_t;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr gpuError_t gpuErrorOutOfMemory = hipErrorOutOfMemory;
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess
inline constexpr gpuError_t gpuErrorPeerAccessAlreadyEnabled = hipErrorPeerAccessAlreadyEnabled;
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define gpuDevAttrWarpSize hipDeviceAttributeWarpSize
#define gpuDevAttrComputeCapabilityMajor hipDeviceAttributeComputeCapabilityMajor
// CUDA's opt-in attribute has no HIP twin: AMD blocks may use what the device has per block.
#define gpuDevAttrSharedPerBlockOptin hipDeviceAttributeMaxSharedMemoryPerBlock
#define gpuOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemGetInfo hipMemGetInfo
#define gpuMemcpy hipMemcpy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemset hipMemset
#define gpuMemsetAsync hipMemsetAsync
#define gpuStreamCreate hipStreamCreate
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEvent_t hipEvent_t
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuHostAlloc hipHostMalloc
#define gpuFreeHost hipHostFree
#if !defined(__HIP_CPU_RT__)  // HIP-CPU has no graphs (runtime/graph.h: kGraphCapture)
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuGraphInstantiateWithFlags hipGraphInstantiateWithFlags
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#endif

#else
#error "vendor.h needs ROCMFORGE_GPU_CUDA or ROCMFORGE_GPU_HIP (link rf_gpu)"
#endif

namespace rf::gpu {

// "cuda" or "hip": the runtime this build talks to.
const char* backend_name();

// Throws rf::Error naming the call, where it was made and the runtime's own message. An error that
// leaves the device's context unusable (an illegal address, an ECC error, a kernel's assert) would
// fail every later call, every request with it: the process ends instead, saying why, with exit
// code kExitDeviceLost, for its supervisor to restart it.
[[noreturn]] void throw_gpu_error(gpuError_t status, const char* call, const char* file, int line);
inline constexpr int kExitDeviceLost = 3;

}  // namespace rf::gpu

// Checks a runtime call's status.
#define RF_GPU_CHECK(call)                                                                  \
  do {                                                                                      \
    const gpuError_t rf_gpu_status = (call);                                                \
    if (rf_gpu_status != gpuSuccess) ::rf::gpu::throw_gpu_error(rf_gpu_status, #call, __FILE__, __LINE__); \
  } while (0)

// After a <<<...>>> launch: reports a bad configuration (launches are otherwise silent).
#define RF_GPU_CHECK_LAUNCH() RF_GPU_CHECK(gpuGetLastError())

#if defined(__CUDACC__) || defined(__HIPCC__)
// ---- Device half ----
#include <cstddef>
#include <utility>

#if defined(ROCMFORGE_GPU_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#endif

// RF_WARP_SIZE: lanes per warp (NVIDIA) or wavefront (AMD), a compile-time constant of each target.
// CDNA (gfx9: gfx908, gfx90a, gfx94x) runs 64-wide wavefronts; RDNA (gfx10+) 32-wide; NVIDIA 32.
// On HIP the host pass sees a placeholder value, so RF_WARP_SIZE must never shape a kernel's
// signature or a launch: host code sizes launches in threads, kernels split them into warps.
// HIP-CPU runs 64-lane wavefronts (its warpSize).
#if defined(ROCMFORGE_GPU_CUDA)
#define RF_WARP_SIZE 32
#elif defined(__HIP_CPU_RT__)
#define RF_WARP_SIZE 64
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
#define RF_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#elif defined(__GFX9__)
#define RF_WARP_SIZE 64
#else
#define RF_WARP_SIZE 32
#endif

// A kernel of blocks of up to `threads` threads whose registers are capped at `registers` a thread, so
// that its blocks leave room on their SM for another kernel's: nvcc's __maxnreg__ (which it takes in
// place of __launch_bounds__, not with it). HIP has no cap: the bound alone.
#if defined(ROCMFORGE_GPU_CUDA)
#define RF_LAUNCH_BOUNDS_CAPPED(threads, registers) __maxnreg__(registers)
#else
#define RF_LAUNCH_BOUNDS_CAPPED(threads, registers) __launch_bounds__(threads)
#endif

// RF_DYNAMIC_SHARED(type, name): `name`, the launch's dynamic shared memory as an array of `type`
// (extern __shared__ type name[]). HIP-CPU has no extern shared arrays: its own macro gives a pointer.
#if defined(__HIP_CPU_RT__)
#define RF_DYNAMIC_SHARED(type, name) HIP_DYNAMIC_SHARED(type, name)
#else
#define RF_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

// The widest warp of any target: launch shapes built from it hold whole warps everywhere.
inline constexpr int kMaxWarpSize = 64;
static_assert(kMaxWarpSize % RF_WARP_SIZE == 0);

namespace rf::gpu {

// v from the lane whose index is this lane's xor `lane_mask`, over the whole warp.
__device__ __forceinline__ float shuffle_xor(float v, int lane_mask) {
#if defined(ROCMFORGE_GPU_CUDA)
  constexpr unsigned kAllLanes = 0xffffffffu;  // CUDA's mask type is 32 bits: one bit per lane
  return __shfl_xor_sync(kAllLanes, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);  // HIP 5.2 has no _sync variants; wavefronts run in lockstep
#endif
}

// c plus the dot product of the four signed bytes of a with those of b: one instruction on NVIDIA
// (dp4a) and on the AMD targets that have v_dot4_i32_i8 (CDNA, RDNA2), four multiply-adds elsewhere.
__device__ __forceinline__ int dot4_i8(int a, int b, int c) {
#if defined(ROCMFORGE_GPU_CUDA)
  return __dp4a(a, b, c);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx1030__)
  return __builtin_amdgcn_sdot4(a, b, c, false);
#else
  for (int i = 0; i < 32; i += 8) c += static_cast<signed char>(a >> i) * static_cast<signed char>(b >> i);
  return c;
#endif
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), in a form the host compiler takes too (HIP-CPU
// has no <<<>>>; hipLaunchKernelGGL is its launch). Then RF_GPU_CHECK_LAUNCH() as after any launch.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, gpuStream_t stream,
            Args&&... args) {
#if defined(__HIP_CPU_RT__)
  hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
#endif
}

__device__ __forceinline__ float half_bits_to_float(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }
__device__ __forceinline__ unsigned short float_to_half_bits(float v) { return __half_as_ushort(__float2half_rn(v)); }

// Round to nearest even; NaN stays a (quiet) NaN. The device twin of rf::f32_to_bf16.
__device__ __forceinline__ unsigned short float_to_bf16_bits(float v) {
  unsigned u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

// v rounded to bf16's bits or else f16's.
__device__ __forceinline__ unsigned short float_to_16bit(float v, bool bf16) {
  return bf16 ? float_to_bf16_bits(v) : float_to_half_bits(v);
}

// The value of bf16's bits or else f16's.
__device__ __forceinline__ float bits16_to_float(unsigned short bits, bool bf16) {
  return bf16 ? __uint_as_float(static_cast<unsigned>(bits) << 16) : half_bits_to_float(bits);
}

}  // namespace rf::gpu
#endif  // device half
