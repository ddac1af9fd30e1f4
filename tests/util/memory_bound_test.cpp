#include "util/memory_bound.h"

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace rf {
namespace {

TEST(MemoryBound, SharesAndSizesAsUsersWriteThem) {
  EXPECT_DOUBLE_EQ(parse_memory_bound("0.9").share, 0.9);
  EXPECT_EQ(parse_memory_bound("0.9").bytes, 0u);
  EXPECT_DOUBLE_EQ(parse_memory_bound("1").share, 1.0);
  EXPECT_FALSE(parse_memory_bound("1").bounds_anything());
  EXPECT_TRUE(parse_memory_bound("0.5").bounds_anything());
  EXPECT_EQ(parse_memory_bound("20GiB").bytes, 20ull << 30);
  EXPECT_EQ(parse_memory_bound("1.5gib").bytes, 3ull << 29);
  EXPECT_EQ(parse_memory_bound("512MiB").bytes, 512ull << 20);
  EXPECT_EQ(parse_memory_bound("24GB").bytes, 24'000'000'000ull);
  EXPECT_EQ(parse_memory_bound("1TiB").bytes, 1ull << 40);
  EXPECT_TRUE(parse_memory_bound("2MB").bounds_anything());
}

TEST(MemoryBound, AnythingElseIsRefusedNamingTheValue) {
  for (const std::string value :
       {"0", "1.5", "-0.5", "", "abc", "20XB", "20 GiB", "-1GiB", "0.5MiB", "1e400", "nan", "1e30TiB"}) {
    try {
      parse_memory_bound(value);
      ADD_FAILURE() << "'" << value << "' was taken";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + value + "': "), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace rf
