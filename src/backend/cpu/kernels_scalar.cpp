// The portable kernels: the lanes policy is a plain array of 8 floats, which the compiler turns
// into whatever vector instructions the baseline target has. This file also documents the policy.
#include <array>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernel_templates.h"
#include "util/half.h"

namespace rf::cpu {

namespace {

struct ScalarLanes {
  struct V {
    float v[8];
  };

  template <class F>
  static V make(F lane) {
    V r;
    for (int j = 0; j < 8; ++j) r.v[j] = lane(j);
    return r;
  }

  // Integer lanes are widened to int32 first: the compiler then vectorises the bit twiddling and
  // conversion that follow, which it does not do on the narrow types.
  template <class T>
  static std::array<std::int32_t, 8> widen(const T* p) {
    std::array<std::int32_t, 8> q;
    for (int j = 0; j < 8; ++j) q[j] = p[j];
    return q;
  }

  // GEMM register block (rows x tokens): with SSE2 each V takes two of the 16 registers; larger
  // blocks spill.
  static constexpr int kMicroRows = 2, kMicroTokens = 3;

  static V zero() { return splat(0.0f); }
  static V splat(float s) { return make([&](int) { return s; }); }
  static V load(const float* p) {
    V r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void store(float* p, const V& a) { std::memcpy(p, a.v, sizeof(a.v)); }
  static V add(const V& a, const V& b) { return make([&](int j) { return a.v[j] + b.v[j]; }); }
  static V mul(const V& a, const V& b) { return make([&](int j) { return a.v[j] * b.v[j]; }); }
  static V fma(const V& a, const V& b, const V& c) { return make([&](int j) { return a.v[j] * b.v[j] + c.v[j]; }); }
  // Same pairing as the AVX2 horizontal sum.
  static float sum(const V& a) {
    return ((a.v[0] + a.v[4]) + (a.v[2] + a.v[6])) + ((a.v[1] + a.v[5]) + (a.v[3] + a.v[7]));
  }

  static float half(std::uint16_t h) { return f16_to_f32(h); }
  static V f16(const std::uint16_t* p) { return make([&](int j) { return f16_to_f32(p[j]); }); }
  static V bf16(const std::uint16_t* p) { return make([&](int j) { return bf16_to_f32(p[j]); }); }
  static V i8(const std::int8_t* p) {
    const auto q = widen(p);
    return make([&](int j) { return static_cast<float>(q[j]); });
  }
  // The 8 bytes of a little-endian word.
  static V u8x8(std::uint64_t bytes) {
    return make([&](int j) { return static_cast<float>((bytes >> 8 * j) & 0xff); });
  }
  // ((p[j] >> shift) & 15) - offset
  static V nibbles(const std::uint8_t* p, int shift, int offset) {
    const auto q = widen(p);
    return make([&](int j) { return static_cast<float>(((q[j] >> shift) & 15) - offset); });
  }
  // ((p[j] >> shift) & 15 | ((high >> j) & 1) << 4) - offset: nibbles with a fifth bit from a byte.
  static V nibbles5(const std::uint8_t* p, int shift, std::uint32_t high, int offset) {
    const auto q = widen(p);
    return make([&](int j) {
      return static_cast<float>((((q[j] >> shift) & 15) | static_cast<int>((high >> j) & 1) << 4) - offset);
    });
  }
  // 32 codes of kLoBits bits, with kHiBits more bits above them from a second plane (none for 0),
  // less an offset, into q[0..4): (((lo[j] >> lo_shift) & lo mask) | ((hi[j] >> hi_shift) & hi mask)
  // << kLoBits) - offset. Q6_K's 6-bit values are <4, 2>, Q5_K's <4, 1>, Q3_K's <2, 1>, Q2_K's <2, 0>.
  template <int kLoBits, int kHiBits>
  static void bits32(const std::uint8_t* lo, int lo_shift, const std::uint8_t* hi, int hi_shift, int offset, V* q) {
    constexpr int kLoMask = (1 << kLoBits) - 1, kHiMask = (1 << kHiBits) - 1;
    for (int i = 0; i < 4; ++i) {
      const auto l = widen(lo + 8 * i);
      std::array<std::int32_t, 8> h{};
      if constexpr (kHiBits > 0) h = widen(hi + 8 * i);
      q[i] = make([&](int j) {
        return static_cast<float>((((l[j] >> lo_shift) & kLoMask) | ((h[j] >> hi_shift) & kHiMask) << kLoBits) - offset);
      });
    }
  }
  // The IQ4 types' 32 values from 16 bytes of codes into q[0..4): kIq4Values of the low nibbles of
  // p[0..16), then of the high ones.
  static void iq4x32(const std::uint8_t* p, V* q) {
    for (int i = 0; i < 4; ++i) {
      const auto c = widen(p + 8 * (i & 1));
      q[i] = make([&](int j) { return static_cast<float>(kIq4Values[(c[j] >> 4 * (i >> 1)) & 15]); });
    }
  }
};

constexpr KernelTable kScalarTable = kernels_impl::make_kernel_table<ScalarLanes>();

}  // namespace

const KernelTable& scalar_kernel_table() { return kScalarTable; }

}  // namespace rf::cpu
