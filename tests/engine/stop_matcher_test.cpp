#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace rf {
namespace {

TEST(StopMatcher, StopsAtAStringSplitAcrossPieces) {
  StopMatcher m({"</end>"});
  EXPECT_EQ(m.push("hello </"), "hello ");  // "</" might begin the stop string: held back
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("en"), "");
  EXPECT_EQ(m.push("d> more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("after"), "");
}

TEST(StopMatcher, ReleasesHeldTextThatDidNotBecomeAStop) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("a ST"), "a ");
  EXPECT_EQ(m.push("ar"), "STar");
  EXPECT_EQ(m.push("S"), "");
  EXPECT_EQ(m.flush(), "S");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"cd", "b"});
  EXPECT_EQ(m.push("abcd"), "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("anything"), "anything");
  EXPECT_EQ(m.flush(), "");
}

}  // namespace
}  // namespace rf
