// The AVX2 + FMA + F16C kernels, compiled for that target whatever the build's baseline is and
// only called after a CPU check (kernel_table.cpp). The lanes policy is documented in
// kernels_scalar.cpp.
#include "backend/cpu/kernel_table.h"

#if defined(__x86_64__)

// Everything that is not a template over the lanes policy is included before the target pragma:
// its inline functions must be compiled for the baseline, since the linker may keep this file's
// copy for every caller.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "backend/cpu/block_formats.h"
#include "formats/dtype.h"
#include "util/half.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "backend/cpu/kernel_templates.h"

namespace rf::cpu {

namespace {

struct Avx2Lanes {
  using V = __m256;

  // GEMM register block: 12 accumulators, 3 weight vectors and 1 activation vector fill the 16 ymm
  // registers; each step of 8 columns does 12 FMAs for 7 loads. (2 x 6 would load fewer weights,
  // but the compiler then folds the activation loads into the FMAs and loads each twice.)
  static constexpr int kMicroRows = 3, kMicroTokens = 4;

  static V zero() { return _mm256_setzero_ps(); }
  static V splat(float s) { return _mm256_set1_ps(s); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static float half(std::uint16_t h) { return _cvtsh_ss(h); }
  static V f16(const std::uint16_t* p) { return _mm256_cvtph_ps(load_128(p)); }
  static V bf16(const std::uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_128(p)), 16));
  }
  static V i8(const std::int8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load_64(p))); }
  static V u8x8(std::uint64_t bytes) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))));
  }
  static V nibbles(const std::uint8_t* p, int shift, int offset) {
    const __m256i q =
        _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(load_64(p)), shift), _mm256_set1_epi32(15));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(offset)));
  }
  static V nibbles5(const std::uint8_t* p, int shift, std::uint32_t high, int offset) {
    const __m256i lo =
        _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(load_64(p)), shift), _mm256_set1_epi32(15));
    const __m256i bit = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(high)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(bit, _mm256_set1_epi32(1)), 4);
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(offset)));
  }
  // Assembles the 32 values bytewise (16-bit shifts are fine: the masks drop the bits that cross
  // bytes), then widens 8 at a time: half the work of widening first.
  template <int kLoBits, int kHiBits>
  static void bits32(const std::uint8_t* lo, int lo_shift, const std::uint8_t* hi, int hi_shift, int offset, V* q) {
    constexpr char kLoMask = (1 << kLoBits) - 1, kHiMask = (1 << kHiBits) - 1;
    __m256i v = _mm256_and_si256(_mm256_srli_epi16(load_256(lo), lo_shift), _mm256_set1_epi8(kLoMask));
    if constexpr (kHiBits > 0) {
      const __m256i h = _mm256_and_si256(_mm256_srli_epi16(load_256(hi), hi_shift), _mm256_set1_epi8(kHiMask));
      v = _mm256_or_si256(v, _mm256_slli_epi16(h, kLoBits));
    }
    widen32(_mm256_sub_epi8(v, _mm256_set1_epi8(static_cast<char>(offset))), q);
  }
  // Both nibbles of 16 bytes through the 16-entry table at once (a byte shuffle).
  static void iq4x32(const std::uint8_t* p, V* q) {
    const __m128i table = load_128(kIq4Values), mask = _mm_set1_epi8(15), codes = load_128(p);
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(codes, mask));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(codes, 4), mask));
    widen32(_mm256_set_m128i(hi, lo), q);
  }

 private:
  // 32 signed bytes into q[0..4), 8 at a time.
  static void widen32(__m256i v, V* q) {
    const __m128i halves[2] = {_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)};
    for (int i = 0; i < 4; ++i) {
      const __m128i h = halves[i >> 1];
      q[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(i & 1 ? _mm_unpackhi_epi64(h, h) : h));
    }
  }
  static __m128i load_64(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }
  static __m128i load_128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static __m256i load_256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
};

constexpr KernelTable kAvx2Table = kernels_impl::make_kernel_table<Avx2Lanes>();

}  // namespace

const KernelTable* avx2_kernel_table() { return &kAvx2Table; }

}  // namespace rf::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

namespace rf::cpu {
const KernelTable* avx2_kernel_table() { return nullptr; }
}  // namespace rf::cpu

#endif
