// CacheDelta: a block's latest change wins; a snapshot replaces what came
// before it and stays one; two reports merged say what the two said in turn.
#include "stage_worker/cache_delta.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

v1::CacheEvents Events(bool snapshot, std::vector<uint64_t> stored,
                       std::vector<uint64_t> evicted) {
  v1::CacheEvents events;
  events.set_snapshot(snapshot);
  for (uint64_t block : stored) events.add_stored(block);
  for (uint64_t block : evicted) events.add_evicted(block);
  return events;
}

std::vector<uint64_t> Stored(const CacheDelta& delta) {
  v1::CacheEvents events = delta.ToProto();
  return {events.stored().begin(), events.stored().end()};
}

std::vector<uint64_t> Evicted(const CacheDelta& delta) {
  v1::CacheEvents events = delta.ToProto();
  return {events.evicted().begin(), events.evicted().end()};
}

TEST(CacheDeltaTest, ABlocksLatestChangeWins) {
  CacheDelta delta;
  delta.Apply(1, true);
  delta.Apply(2, true);
  delta.Apply(1, false);
  delta.Apply(3, false);
  delta.Apply(3, true);
  EXPECT_FALSE(delta.snapshot());
  EXPECT_EQ(delta.size(), 3u);
  EXPECT_THAT(Stored(delta), UnorderedElementsAre(2, 3));
  EXPECT_THAT(Evicted(delta), UnorderedElementsAre(1));
  EXPECT_FALSE(delta.ToProto().snapshot());
}

TEST(CacheDeltaTest, ChangesAfterASnapshotKeepItOne) {
  CacheDelta delta(Events(true, {1, 2, 3}, {}));
  delta.Apply(2, false);
  delta.Apply(4, true);
  EXPECT_TRUE(delta.snapshot());
  EXPECT_THAT(Stored(delta), UnorderedElementsAre(1, 3, 4));
  EXPECT_THAT(Evicted(delta), IsEmpty());
}

// An empty snapshot says something: the cache holds nothing.
TEST(CacheDeltaTest, AnEmptySnapshotIsStillASnapshot) {
  CacheDelta delta(Events(true, {}, {}));
  EXPECT_TRUE(delta.ToProto().snapshot());
  EXPECT_EQ(delta.size(), 0u);
}

TEST(CacheDeltaTest, MergedReportsSayWhatTheTwoSaidInTurn) {
  CacheDelta delta(Events(false, {1, 2}, {7}));
  delta.Apply(Events(false, {7}, {1, 9}));
  EXPECT_FALSE(delta.snapshot());
  EXPECT_THAT(Stored(delta), UnorderedElementsAre(2, 7));
  EXPECT_THAT(Evicted(delta), UnorderedElementsAre(1, 9));
}

TEST(CacheDeltaTest, ALaterSnapshotReplacesEverythingBeforeIt) {
  CacheDelta delta(Events(false, {1, 2}, {7}));
  delta.Apply(Events(true, {5, 6}, {}));
  delta.Apply(Events(false, {8}, {5}));
  EXPECT_TRUE(delta.snapshot());
  EXPECT_THAT(Stored(delta), UnorderedElementsAre(6, 8));
  EXPECT_THAT(Evicted(delta), IsEmpty());
}

}  // namespace
}  // namespace omnistage
