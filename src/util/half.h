#pragma once
// IEEE binary16 and bfloat16 conversions on the host (round to nearest even).
#include <bit>
#include <cstdint>

namespace rf {

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float f16_to_f32(std::uint16_t h) {
#if defined(__FLT16_MAX__) && !defined(__CUDACC__) && !defined(__HIPCC__)
  return static_cast<float>(std::bit_cast<_Float16>(h));
#else
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 113;
      while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
#endif
}

inline std::uint16_t f32_to_f16(float f) {
#if defined(__FLT16_MAX__) && !defined(__CUDACC__) && !defined(__HIPCC__)
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
#else
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero: round via float arithmetic
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(__builtin_nearbyintf(scaled)));
  }
  std::uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u) - (112u << 23);
  return static_cast<std::uint16_t>(sign | (r >> 13));
#endif
}

}  // namespace rf
