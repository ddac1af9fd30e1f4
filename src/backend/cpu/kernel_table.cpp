#include "backend/cpu/kernel_table.h"

#include <atomic>

#include "util/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace rf::cpu {

namespace {

// __builtin_cpu_supports also checks that the OS saves the YMM registers. F16C comes from CPUID
// directly: not every compiler's builtin knows it.
bool cpu_has_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  unsigned eax, ebx, ecx, edx;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

const KernelTable& table_for(Isa isa) { return isa == Isa::Avx2 ? *avx2_kernel_table() : scalar_kernel_table(); }

std::atomic<Isa>& selected() {
  static std::atomic<Isa> isa{isa_supported(Isa::Avx2) ? Isa::Avx2 : Isa::Scalar};
  return isa;
}

}  // namespace

bool isa_supported(Isa isa) {
  if (isa == Isa::Scalar) return true;
  static const bool avx2 = avx2_kernel_table() != nullptr && cpu_has_avx2();
  return avx2;
}

Isa active_isa() { return selected().load(std::memory_order_relaxed); }

void set_isa(Isa isa) {
  if (!isa_supported(isa)) fail("the AVX2 kernels need a CPU with AVX2, FMA and F16C");
  selected().store(isa, std::memory_order_relaxed);
}

const KernelTable& kernels() { return table_for(active_isa()); }

}  // namespace rf::cpu
