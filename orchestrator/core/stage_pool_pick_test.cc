// StagePool's load-aware picking (PickPolicy::kLeastLoaded): the workers'
// reported load per capacity decides a request's first replica, ties go round
// robin, and a bound request stays where it is.
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/stage_pool.h"
#include "orchestrator/core/stage_pool_test_util.h"
#include "tests/fake_replica_client.h"

namespace omnistage {
namespace stage_pool_test {
namespace {

TEST(StagePoolPickTest, LeastLoadedPicksTheLowestLoadPerCapacityAndStaysSticky) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  pool->set_pick(PickPolicy::kLeastLoaded);
  v1::Ready ready;
  ready.set_capacity(4);
  for (int r = 0; r < 3; ++r) pool->Admit(r, ready);
  ready.set_capacity(8);
  pool->Admit(2, ready);
  const absl::Time now = absl::Now();
  pool->ReportLoad(0, 3, now);  // 3/4 (other orchestrators' work)
  pool->ReportLoad(1, 1, now);  // 1/4
  pool->ReportLoad(2, 4, now);  // 4/8
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(1));  // 1/4 -> 2/4 with x
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(1));  // Sticky.
  // 2/4 = 4/8: a tie goes to the first from the round-robin position (1 now).
  EXPECT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("z"), IsOkAndHolds(2));  // 3/4 vs 4/8.
  // A report replaces the estimate: replica 0 finished its work.
  pool->ReportLoad(0, 0, now);
  EXPECT_THAT(pool->Pick("w"), IsOkAndHolds(0));
  EXPECT_EQ(pool->state(0).sent_since_load, 1);
  v1::StageStatus status;
  pool->AppendStatus(&status, now + absl::Milliseconds(7));
  EXPECT_EQ(status.replicas(1).load_requests(), 1);
  EXPECT_EQ(status.replicas(1).load_age_ms(), 7);
}

TEST(StagePoolPickTest, LeastLoadedWithoutReportsIsRoundRobin) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  pool->set_pick(PickPolicy::kLeastLoaded);
  // Each pick counts as load until a report: an even spread.
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("z"), IsOkAndHolds(2));
  EXPECT_THAT(pool->Pick("w"), IsOkAndHolds(0));
  v1::StageStatus status;
  pool->AppendStatus(&status, absl::Now());
  EXPECT_EQ(status.replicas(0).load_age_ms(), -1);
}

}  // namespace
}  // namespace stage_pool_test
}  // namespace omnistage
