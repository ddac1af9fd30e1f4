#include "util/progress_meter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rf {
namespace {

constexpr std::uint64_t kGiB = 1u << 30;

struct Recorded {
  double now = 0;
  std::vector<std::string> writes;

  ProgressMeter meter(ProgressMeter::Style style) {
    return ProgressMeter(
        "loading m", style, [this](std::string_view text) { writes.emplace_back(text); }, [this] { return now; });
  }
};

TEST(ProgressMeter, QuickStepsShowNothing) {
  for (auto style : {ProgressMeter::Style::Bar, ProgressMeter::Style::Lines}) {
    Recorded r;
    auto meter = r.meter(style);
    for (int i = 1; i <= 10; ++i) {
      r.now = 0.02 * i;
      meter.update(i * kGiB, 10 * kGiB);
    }
    EXPECT_TRUE(r.writes.empty()) << r.writes.front();
  }
}

TEST(ProgressMeter, LinesAtEachTenthOnceASecondHasPassed) {
  Recorded r;
  auto meter = r.meter(ProgressMeter::Style::Lines);
  for (int i = 1; i <= 40; ++i) {
    r.now = 0.1 * i;
    meter.update(i * kGiB / 4, 10 * kGiB);
  }
  const std::vector<std::string> expected = {
      "loading m: 20% (2.5 of 10.0 GiB)", "loading m: 30% (3.0 of 10.0 GiB)", "loading m: 40% (4.0 of 10.0 GiB)",
      "loading m: 50% (5.0 of 10.0 GiB)", "loading m: 60% (6.0 of 10.0 GiB)", "loading m: 70% (7.0 of 10.0 GiB)",
      "loading m: 80% (8.0 of 10.0 GiB)", "loading m: 90% (9.0 of 10.0 GiB)", "loading m: 10.0 GiB in 4.0 s"};
  EXPECT_EQ(r.writes, expected);
}

TEST(ProgressMeter, BarRedrawsInPlaceAndEndsTheLine) {
  Recorded r;
  auto meter = r.meter(ProgressMeter::Style::Bar);
  for (int i = 1; i <= 64; ++i) {  // 1/64 s apart: exact in binary
    r.now = i / 64.0;
    meter.update(i * kGiB, 64 * kGiB);
  }
  // Drawn from 0.3 s on, at most every 0.1 s, and once more at the end.
  ASSERT_EQ(r.writes.size(), 8u);
  EXPECT_EQ(r.writes.front(), "\rloading m [=========                     ]  31% 20.0 / 64.0 GiB");
  EXPECT_EQ(r.writes[1], "\rloading m [============                  ]  42% 27.0 / 64.0 GiB");
  EXPECT_EQ(r.writes.back(), "\rloading m [==============================] 100% 64.0 / 64.0 GiB in 1.0 s\n");
  for (const auto& w : r.writes) EXPECT_EQ(w.front(), '\r');
}

}  // namespace
}  // namespace rf
