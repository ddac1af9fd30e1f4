#pragma once
// NVIDIA's warp-level tensor-core and async-copy instructions (sm_80+), as inline PTX: only for kernels
// whose CUDA fast path is guarded by __CUDA_ARCH__ >= 800 and checked for at run time (HIP builds and
// older GPUs take the portable kernels). Fragment layouts (PTX ISA, mma.m16n8k16): lane l holds A's and
// C's rows l/4 and l/4 + 8, B's column l/4, at columns (of A, rows of B) 2(l%4) + {0, 1} and + 8.
#include "backend/gpu/runtime/vendor.h"

#if defined(ROCMFORGE_GPU_CUDA)

namespace rf::gpu {

// mma.sync is an instruction of a 32-lane warp; m16n8k16's C tile is 16 rows by 8 columns.
inline constexpr int kMmaLanes = 32, kMmaRows = 16, kMmaCols = 8;

// Whether the build holds code of `kernel` for this device made for sm_80 or later, the fast paths'
// condition: false (and no error left for later checks) where it holds none.
template <class Kernel>
bool built_for_tensor_cores(Kernel* kernel) {
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.ptxVersion >= 80;
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without a register stop; zeros instead where !valid (src then unread).
__device__ __forceinline__ void copy_async(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 16-bit matrices from shared memory; lanes 8m..8m+7 give the row addresses of matrix m.
__device__ __forceinline__ void load_matrices(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}
__device__ __forceinline__ void load_matrices_transposed(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

// c += a b for a 16x16 A (row-major fragment a0..a3), a 16x8 B (column-major, b0 b1), fp32 C; A and B
// f16, or bf16 where kBf16.
template <bool kBf16 = false>
__device__ __forceinline__ void mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                    unsigned b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  mma(c, a[0], a[1], a[2], a[3], b0, b1);
}

// c += a b for a 16x16 A and a 16x8 B of signed bytes, int32 C (mma.m16n8k16 .s8): lane l holds A's
// rows l/4 (a0) and l/4 + 8 (a1) and B's column l/4, each at the 4 columns (of A, rows of B) 4(l%4) +
// [0, 4), one a byte; C as above.
__device__ __forceinline__ void mma_s8(int (&c)[4], int a0, int a1, int b0) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0));
}

}  // namespace rf::gpu

#endif
