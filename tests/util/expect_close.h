#pragma once
// The numeric check the tests share: every output finite and max |out - ref| within a tolerance
// relative to max |ref|, with the error printed beside its tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>

namespace rf::test {

// The largest |out - ref| over the largest |ref|; NaN when an output is not finite.
inline double relative_max_error(std::span<const float> out, std::span<const float> ref) {
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return NAN;
    worst = std::max(worst, std::abs(static_cast<double>(out[i]) - ref[i]));
    largest = std::max(largest, std::abs(static_cast<double>(ref[i])));
  }
  return worst / largest;
}

inline void expect_close(const std::string& what, std::span<const float> out, std::span<const float> ref,
                         double tolerance) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  const double relative = relative_max_error(out, ref);
  std::printf("[  error   ] %-32s %.2e of max |ref| (tolerance %.0e)\n", what.c_str(), relative, tolerance);
  EXPECT_TRUE(std::isfinite(relative)) << what << ": an output is not finite (unwritten?)";
  EXPECT_LE(relative, tolerance) << what;
}

}  // namespace rf::test
