// Reference-counted blocks and the prefix cache: shared blocks outlive their first owner,
// unreferenced cached blocks are evicted least recently used first, and keys name whole prefixes.
#include "engine/prefix_cache.h"

#include <numeric>

#include <gtest/gtest.h>

#include "util/error.h"

namespace rf {
namespace {

constexpr int kBlock = 4;

std::vector<std::int32_t> iota_tokens(int n, int start = 0) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(PrefixCache, KeysNameTheWholePrefix) {
  const auto a = iota_tokens(8), b = iota_tokens(8, 100);
  const auto first = prefix_block_key(0, std::span(a).first(4));
  EXPECT_EQ(prefix_block_key(first, std::span(a).last(4)), prefix_block_key(first, std::span(a).last(4)));
  // The same block after a different prefix is a different key.
  EXPECT_NE(prefix_block_key(first, std::span(a).last(4)), prefix_block_key(prefix_block_key(0, std::span(b).first(4)), std::span(a).last(4)));
}

TEST(PrefixCache, ASecondSequenceAdoptsThePublishedBlocks) {
  BlockAllocator blocks(8);
  const auto tokens = iota_tokens(10);
  std::vector<std::int32_t> first;
  PrefixChain first_chain;
  ASSERT_TRUE(blocks.reserve(first, 10, kBlock));
  first_chain.publish_full(blocks, tokens, 10, kBlock, first);  // two full blocks of 4
  EXPECT_EQ(blocks.cached_blocks(), 2);

  std::vector<std::int32_t> second;
  PrefixChain second_chain;
  EXPECT_EQ(second_chain.adopt_cached(blocks, tokens, kBlock, 8, second), 8u);
  EXPECT_EQ(second, std::vector<std::int32_t>(first.begin(), first.begin() + 2));
  blocks.release_all(first);
  EXPECT_EQ(blocks.free_blocks(), 6);  // the shared two are still referenced
  blocks.release_all(second);
  EXPECT_EQ(blocks.free_blocks(), 8);  // cached but free to evict
  EXPECT_EQ(blocks.cached_blocks(), 2);

  // A prefix that differs in its second block shares only the first.
  auto other = tokens;
  other[5] = 99;
  std::vector<std::int32_t> third;
  PrefixChain third_chain;
  EXPECT_EQ(third_chain.adopt_cached(blocks, other, kBlock, 8, third), 4u);
  blocks.release_all(third);
}

TEST(PrefixCache, CachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  BlockAllocator blocks(2);
  std::vector<std::int32_t> a, b;
  ASSERT_TRUE(blocks.reserve(a, kBlock, kBlock));
  ASSERT_TRUE(blocks.reserve(b, kBlock, kBlock));
  const std::int32_t block_a = a[0], block_b = b[0];
  blocks.publish(block_a, 1);
  blocks.publish(block_b, 2);
  blocks.release_all(a);
  blocks.release_all(b);
  const auto hit = blocks.find(1);  // a is used again: b is now the least recently used
  ASSERT_EQ(hit, block_a);
  blocks.release(*hit);
  EXPECT_EQ(blocks.allocate(), block_b);
  EXPECT_FALSE(blocks.find(2));  // evicted with its block
  EXPECT_EQ(blocks.find(1), block_a);
  EXPECT_FALSE(blocks.allocate());  // both referenced: full, reported
  blocks.release(block_a);
  blocks.release(block_b);
  EXPECT_THROW(blocks.release(block_b), Error);
  EXPECT_EQ(blocks.free_blocks(), 2);
}

}  // namespace
}  // namespace rf
