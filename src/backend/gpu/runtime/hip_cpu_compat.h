#pragma once
// What the kernels and their host code use of HIP that ROCm's HIP CPU runtime (third_party/hip-cpu, the
// hip-cpu preset) does not declare, written as HIP defines it. Included by vendor.h after the runtime's
// headers, only where __HIP_CPU_RT__ is defined; nothing here exists on a real HIP or CUDA build.
#if !defined(__HIP_CPU_RT__)
#error "hip_cpu_compat.h is for HIP-CPU builds (vendor.h includes it)"
#endif

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

// ---- Host: device attributes, read from the runtime's properties ----
enum hipDeviceAttribute_t {
  hipDeviceAttributeMultiprocessorCount,
  hipDeviceAttributeWarpSize,
  hipDeviceAttributeMaxSharedMemoryPerBlock,
  hipDeviceAttributeComputeCapabilityMajor,
};

inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int device) {
  hipDeviceProp_t prop{};
  const hipError_t status = hipGetDeviceProperties(&prop, device);
  if (status != hipSuccess) return status;
  switch (attribute) {
    case hipDeviceAttributeMultiprocessorCount: *value = prop.multiProcessorCount; break;
    // The wavefront the kernels see (warpSize, 64), not the properties' warpSize (the CPU's SIMD width).
    case hipDeviceAttributeWarpSize: *value = warpSize; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *value = static_cast<int>(prop.sharedMemPerBlock); break;
    case hipDeviceAttributeComputeCapabilityMajor: *value = prop.major; break;
  }
  return hipSuccess;
}

// hipHostMalloc's flags as an int, as ROCm's header takes them.
inline hipError_t hipHostMalloc(void** ptr, std::size_t size, unsigned flags) {
  return hipHostMalloc(ptr, size, static_cast<hipHostMallocKind>(flags));
}
template <class T>
inline hipError_t hipHostMalloc(T** ptr, std::size_t size, unsigned flags) {
  return hipHostMalloc(reinterpret_cast<void**>(ptr), size, flags);
}

// ---- Device: HIP's device functions that the runtime leaves out ----
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

using std::isinf;
using std::isnan;

// glibc declares __expf without exporting it; HIP's is the fast exponential.
inline float __expf(float x) noexcept { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }  // ties to even
inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
// Unfused, rounded to nearest: the host compiler contracts nothing across these calls at ISO C++.
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
// Byte i of the result is byte s[4i..4i+2] of the eight bytes y:x (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
}
