#include "util/half.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace rf {
namespace {

float bits_f32(std::uint32_t u) { return std::bit_cast<float>(u); }
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Half, F16EncodesKnownValues) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);            // the largest finite half
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // the smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -15)), 0x0200);  // a subnormal
}

TEST(Half, F16RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 0x3c00 and 0x3c01: the even one wins; 1 + 3 * 2^-11 goes up to 0x3c02.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just past halfway rounds up, just short rounds down.
  EXPECT_EQ(f32_to_f16(bits_f32(0x3f801001)), 0x3c01);
  EXPECT_EQ(f32_to_f16(bits_f32(0x3f800fff)), 0x3c00);
  // The same among subnormals: 2^-25 is halfway between 0 and 0x0001, 3 * 2^-25 between 0x0001 and 0x0002.
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
  // 65520 is halfway between 65504 and 65536 (past the range): it rounds to infinity, 65519 does not.
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
}

TEST(Half, F16KeepsInfinityAndNan) {
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  const std::uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0xfc01)));
  EXPECT_EQ(f16_to_f32(0x7c00), kInf);
  EXPECT_EQ(f16_to_f32(0xfc00), -kInf);
}

TEST(Half, F16DecodesKnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * std::ldexp(1.0f, -24));  // the largest subnormal
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(Half, F16RoundTripsEveryNonNanValue) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
    if (nan) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<std::uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, Bf16KeepsTheTopHalfOfAFloat) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_f32(0x0001), bits_f32(0x00010000));  // subnormals pass through
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f808000)), 0x3f80);  // halfway, down to even
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f818000)), 0x3f82);  // halfway, up to even
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f808001)), 0x3f81);  // past halfway
  EXPECT_EQ(f32_to_bf16(bits_f32(0x3f807fff)), 0x3f80);  // short of halfway
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
}

TEST(Half, Bf16KeepsInfinityAndNan) {
  EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(bf16_to_f32(0xff80), -kInf);
  // A NaN whose payload is only in the low half must stay a NaN, not round to infinity.
  const std::uint16_t nan = f32_to_bf16(bits_f32(0x7f800001));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace rf
