// PrefixCache: the hit rule (a leading run of held blocks), LRU eviction at
// capacity, the change log, the figures. Block names are small numbers here:
// the cache never looks inside them.
#include "stage_worker/engines/base/prefix_cache.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kBlockTokens = 4;

// Runs `blocks` as a new input (its first run); the hit tokens.
int64_t RunNew(PrefixCache& cache, std::vector<uint64_t> blocks) {
  bool hitting = true;
  return cache.Run(blocks, &hitting);
}

// A change as "+N" (stored) or "-N" (evicted).
std::vector<std::string> Changes(PrefixCache& cache) {
  std::vector<std::string> out;
  for (const CacheChange& change : cache.TakeChanges()) {
    out.push_back((change.stored ? "+" : "-") + std::to_string(change.block));
  }
  return out;
}

TEST(PrefixCacheTest, LeadingHeldBlocksHit) {
  PrefixCache cache(/*capacity_blocks=*/16, kBlockTokens);
  EXPECT_EQ(RunNew(cache, {1, 2, 3}), 0);
  EXPECT_EQ(RunNew(cache, {1, 2, 3}), 3 * kBlockTokens);
  EXPECT_EQ(RunNew(cache, {1, 2, 7, 8}), 2 * kBlockTokens);
  PrefixCacheStats stats = cache.stats();
  EXPECT_EQ(stats.blocks, 5);
  EXPECT_EQ(stats.hit_tokens, 5 * kBlockTokens);
  EXPECT_EQ(stats.miss_tokens, 5 * kBlockTokens);
}

// After the first block it does not hold, every block misses, held or not.
TEST(PrefixCacheTest, NothingHitsAfterTheFirstMiss) {
  PrefixCache cache(16, kBlockTokens);
  RunNew(cache, {1, 2, 3});
  EXPECT_EQ(RunNew(cache, {9, 2, 3}), 0);
  EXPECT_EQ(RunNew(cache, {1, 8, 3}), 1 * kBlockTokens);
}

// An input run in several parts keeps its state: a miss in one part makes
// the next part miss too.
TEST(PrefixCacheTest, AMissCarriesOverToTheInputsLaterRuns) {
  PrefixCache cache(16, kBlockTokens);
  RunNew(cache, {1, 2, 3, 4});
  bool hitting = true;
  EXPECT_EQ(cache.Run(std::vector<uint64_t>{1, 2}, &hitting), 2 * kBlockTokens);
  EXPECT_TRUE(hitting);
  EXPECT_EQ(cache.Run(std::vector<uint64_t>{3}, &hitting), 1 * kBlockTokens);
  EXPECT_EQ(cache.Run(std::vector<uint64_t>{9}, &hitting), 0);
  EXPECT_FALSE(hitting);
  EXPECT_EQ(cache.Run(std::vector<uint64_t>{4}, &hitting), 0);
}

// A run is stored deepest first: its first block becomes the most recently
// used, so a full cache lets the deepest blocks of a prefix go first.
TEST(PrefixCacheTest, EvictsTheLeastRecentlyUsedAtCapacity) {
  PrefixCache cache(/*capacity_blocks=*/3, kBlockTokens);
  RunNew(cache, {1, 2, 3});
  EXPECT_THAT(cache.Blocks(), ElementsAre(3, 2, 1));  // least recently used first
  RunNew(cache, {4});  // evicts 3, the first run's deepest
  EXPECT_FALSE(cache.Holds(3));
  EXPECT_THAT(cache.Blocks(), ElementsAre(2, 1, 4));
  RunNew(cache, {2});  // 2 is now the most recently used; 1 the least
  RunNew(cache, {5, 6});
  EXPECT_THAT(cache.Blocks(), ElementsAre(2, 6, 5));
  EXPECT_EQ(cache.stats().blocks, 3);
}

// The hits are found before the run stores anything, so a run longer than the
// cache still hits the prefix it held, and keeps its first blocks.
TEST(PrefixCacheTest, ARunLongerThanTheCacheHitsFirstThenKeepsItsHead) {
  PrefixCache cache(/*capacity_blocks=*/2, kBlockTokens);
  RunNew(cache, {1, 2});
  EXPECT_EQ(RunNew(cache, {1, 2, 3, 4, 5}), 2 * kBlockTokens);
  EXPECT_THAT(cache.Blocks(), ElementsAre(2, 1));
}

TEST(PrefixCacheTest, LogsStoresAndEvictionsInOrder) {
  PrefixCache cache(/*capacity_blocks=*/2, kBlockTokens);
  RunNew(cache, {1, 2});
  EXPECT_THAT(Changes(cache), ElementsAre("+2", "+1"));
  EXPECT_THAT(Changes(cache), IsEmpty());
  RunNew(cache, {1, 2});  // touched only: no change
  EXPECT_THAT(Changes(cache), IsEmpty());
  RunNew(cache, {3, 4, 5});
  EXPECT_THAT(Changes(cache), ElementsAre("-2", "+5", "-1", "+4", "-5", "+3"));
}

// Tokens outside a whole block are prefilled, counted as misses, and never
// stored.
TEST(PrefixCacheTest, APartialBlockCountsAsMissesAndIsNotStored) {
  PrefixCache cache(16, kBlockTokens);
  cache.CountMiss(3);
  EXPECT_EQ(cache.stats().miss_tokens, 3);
  EXPECT_EQ(cache.stats().hit_tokens, 0);
  EXPECT_EQ(cache.stats().blocks, 0);
  EXPECT_THAT(Changes(cache), IsEmpty());
}

TEST(PrefixCacheTest, LayoutIsWhatItWasMadeWith) {
  PrefixCache cache(/*capacity_blocks=*/100, /*block_tokens=*/8);
  EXPECT_EQ(cache.layout().capacity_blocks, 100);
  EXPECT_EQ(cache.layout().block_tokens, 8);
}

}  // namespace
}  // namespace omnistage
