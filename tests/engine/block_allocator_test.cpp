#include "engine/block_allocator.h"

#include <set>

#include <gtest/gtest.h>

#include "engine/sequence.h"
#include "util/error.h"

namespace rf {
namespace {

TEST(BlockAllocator, ReservesWholeBlocksAndReturnsThem) {
  BlockAllocator blocks(4);
  std::vector<std::int32_t> a, b;
  EXPECT_TRUE(blocks.reserve(a, 17, 16));  // 17 positions need 2 blocks of 16
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(blocks.reserve(a, 32, 16));  // still 2
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(blocks.reserve(b, 30, 16));
  EXPECT_EQ(blocks.free_blocks(), 0);
  const std::set<std::int32_t> distinct = {a[0], a[1], b[0], b[1]};
  EXPECT_EQ(distinct.size(), 4u);
  EXPECT_FALSE(blocks.reserve(a, 33, 16));  // full: refused, table unchanged
  EXPECT_EQ(a.size(), 2u);
  blocks.release_all(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(blocks.free_blocks(), 2);
}

TEST(SequenceBlocks, ReturnsBlocksWhenDestroyedAndReportsAFullCache) {
  BlockAllocator blocks(3);
  {
    SequenceBlocks seq(blocks, 16);
    seq.reserve(40);
    EXPECT_EQ(blocks.free_blocks(), 0);
    EXPECT_THROW(seq.reserve(49), Error);
  }
  EXPECT_EQ(blocks.free_blocks(), 3);
}

}  // namespace
}  // namespace rf
