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
  // 32 of Q6_K's 6-bit values, centred, into q[0..4):
  // (((ql[j] >> lo_shift) & 15) | ((qh[j] >> hi_shift) & 3) << 4) - 32
  static void q6x32(const std::uint8_t* ql, int lo_shift, const std::uint8_t* qh, int hi_shift, V* q) {
    for (int i = 0; i < 4; ++i) {
      const auto lo = widen(ql + 8 * i), hi = widen(qh + 8 * i);
      q[i] = make([&](int j) {
        return static_cast<float>((((lo[j] >> lo_shift) & 15) | (((hi[j] >> hi_shift) & 3) << 4)) - 32);
      });
    }
  }
};

constexpr KernelTable kScalarTable = kernels_impl::make_kernel_table<ScalarLanes>();

}  // namespace

const KernelTable& scalar_kernel_table() { return kScalarTable; }

}  // namespace rf::cpu
