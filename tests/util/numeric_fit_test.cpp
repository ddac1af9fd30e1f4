#include "util/numeric_fit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace rf {
namespace {

TEST(NumericFit, IntegersTakeTheirWholeRangeAndNothingBeyond) {
  EXPECT_TRUE(fits_in<int>(2147483647.0));
  EXPECT_TRUE(fits_in<int>(2147483647.9));  // truncates to INT_MAX
  EXPECT_FALSE(fits_in<int>(2147483648.0));
  EXPECT_TRUE(fits_in<int>(-2147483648.0));
  EXPECT_FALSE(fits_in<int>(-2147483649.0));
  EXPECT_FALSE(fits_in<int>(1e30));
  EXPECT_FALSE(fits_in<int>(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(fits_in<std::uint32_t>(4294967295.0));
  EXPECT_FALSE(fits_in<std::uint32_t>(4294967296.0));
  EXPECT_FALSE(fits_in<std::uint32_t>(-1.0));
  EXPECT_FALSE(fits_in<std::int64_t>(9223372036854775808.0));  // 2^63
  EXPECT_TRUE(fits_in<std::int64_t>(-9223372036854775808.0));
}

TEST(NumericFit, FloatsTakeWhatIsWithinTheirLargestValue) {
  const double largest = std::numeric_limits<float>::max();
  EXPECT_TRUE(fits_in<float>(largest));
  EXPECT_TRUE(fits_in<float>(-largest));
  EXPECT_FALSE(fits_in<float>(1e300));
  EXPECT_FALSE(fits_in<float>(-1e39));
  EXPECT_TRUE(fits_in<float>(1e-300));  // rounds to zero, which is defined
  EXPECT_TRUE(fits_in<double>(1e300));
}

}  // namespace
}  // namespace rf
