// CacheReports: a session's snapshot at Join and the changes after it, per
// block the latest; nothing for a session that did not join; a session that
// falls too far behind gets a snapshot instead.
#include "stage_worker/cache_reports.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

std::vector<uint64_t> Stored(const v1::CacheEvents& events) {
  return {events.stored().begin(), events.stored().end()};
}

std::vector<uint64_t> Evicted(const v1::CacheEvents& events) {
  return {events.evicted().begin(), events.evicted().end()};
}

TEST(CacheReportsTest, ASessionGetsASnapshotThenTheChangesAfterIt) {
  CacheReports reports(/*capacity_blocks=*/8);
  reports.Apply({{1, true}, {2, true}});
  const v1::CacheEvents snapshot = reports.Join(7);
  EXPECT_TRUE(snapshot.snapshot());
  EXPECT_THAT(Stored(snapshot), UnorderedElementsAre(1, 2));
  EXPECT_FALSE(reports.Take(7).has_value());  // nothing new yet

  reports.Apply({{3, true}, {1, false}});
  reports.Apply({{4, true}, {3, false}, {1, true}});
  std::optional<v1::CacheEvents> changes = reports.Take(7);
  ASSERT_TRUE(changes.has_value());
  EXPECT_FALSE(changes->snapshot());
  EXPECT_THAT(Stored(*changes), UnorderedElementsAre(1, 4));
  EXPECT_THAT(Evicted(*changes), UnorderedElementsAre(3));
  EXPECT_FALSE(reports.Take(7).has_value());

  // A later session starts from what is held now.
  EXPECT_THAT(Stored(reports.Join(8)), UnorderedElementsAre(1, 2, 4));
}

TEST(CacheReportsTest, OnlySessionsThatJoinedAreTold) {
  CacheReports reports(8);
  reports.Join(1);
  reports.Apply({{5, true}});
  EXPECT_FALSE(reports.Take(2).has_value());
  reports.Leave(1);
  EXPECT_FALSE(reports.Take(1).has_value());
  reports.Leave(1);  // idempotent
}

TEST(CacheReportsTest, PendingChangesAreBounded) {
  EXPECT_EQ(CacheReports(8).max_pending(), CacheReports::kMinMaxPending);
  EXPECT_EQ(CacheReports(1000).max_pending(), 4000u);
}

// Past max_pending() blocks, a session's changes are dropped and its next
// report is a snapshot of what the cache holds then.
TEST(CacheReportsTest, ASessionTooFarBehindGetsASnapshotInstead) {
  CacheReports reports(/*capacity_blocks=*/4);
  reports.Join(1);
  std::vector<CacheChange> changes;
  for (uint64_t block = 0; block <= reports.max_pending(); ++block) {
    changes.push_back({block, true});
    if (block >= 4) changes.push_back({block - 4, false});  // as a cache of 4 would
  }
  reports.Apply(changes);
  reports.Apply({{5000, true}, {reports.max_pending() - 3, false}});
  std::optional<v1::CacheEvents> report = reports.Take(1);
  ASSERT_TRUE(report.has_value());
  EXPECT_TRUE(report->snapshot());
  const uint64_t last = reports.max_pending();
  EXPECT_THAT(Stored(*report), UnorderedElementsAre(last - 2, last - 1, last, 5000));
  EXPECT_THAT(Evicted(*report), IsEmpty());
  // Then changes again.
  reports.Apply({{6000, true}});
  report = reports.Take(1);
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->snapshot());
  EXPECT_THAT(Stored(*report), UnorderedElementsAreArray({6000}));
}

}  // namespace
}  // namespace omnistage
