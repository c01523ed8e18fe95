// Tests for StagePool membership: replicas added at run time (dead until their
// handshake, appended so existing bindings and the round robin keep their
// meaning), retired (no new requests, bound ones go on, `idle` once they hold
// nothing), brought back before removal, and removed (gone from status and
// utility results, indices never reused).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "orchestrator/routing/testing/stage_pool_harness.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace stage_pool_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::Ready ReadyOf(const std::string& instance) {
  v1::Ready ready;
  ready.set_instance_id(instance);
  ready.set_capacity(8);
  return ready;
}

std::vector<int> ListedReplicas(const StagePool& pool) {
  v1::StageStatus status;
  pool.AppendStatus(&status, absl::Now());
  std::vector<int> listed;
  for (const v1::ReplicaStatus& r : status.replicas()) listed.push_back(r.replica());
  return listed;
}

TEST(StagePoolMembershipTest, AddedReplicaIsDeadUntilItsHandshake) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a});
  EXPECT_EQ(pool->Add(&b, "10.0.0.2:9000", "dns:thinker"), 1);
  EXPECT_FALSE(pool->alive(1));
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(0));
  EXPECT_EQ(pool->state(1).address, "10.0.0.2:9000");
  EXPECT_EQ(pool->state(1).origin, "dns:thinker");
  pool->Admit(1, ReadyOf("b-1"));
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(0, 1));
}

TEST(StagePoolMembershipTest, AppendingKeepsBindingsAndTheRoundRobin) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));  // rr 0 -> 1
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));  // rr 1 -> 2
  const int added = pool->Add(&c, "c:1", "dns:s");
  pool->Admit(added, ReadyOf("c-1"));
  // Bindings stay where they were; the counter goes on over the longer list:
  // live = [0, 1, 2], rr = 2 -> replica 2, then 0.
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("z"), IsOkAndHolds(2));
  EXPECT_THAT(pool->Pick("w"), IsOkAndHolds(0));
}

TEST(StagePoolMembershipTest, RetiredReplicaKeepsItsRequestsAndGoesIdleWithTheLast) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(0));
  int idle = 0;
  pool->Retire(0, [&] { ++idle; });
  EXPECT_EQ(idle, 0);
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(1));
  // Its requests still run there; new ones go elsewhere.
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("n"), IsOkAndHolds(1));
  v1::StageStatus status;
  pool->AppendStatus(&status, absl::Now());
  EXPECT_EQ(status.replicas(0).state(), v1::ReplicaStatus::STATE_DRAINING);
  EXPECT_TRUE(status.replicas(0).retiring());
  pool->Release("x");
  EXPECT_EQ(idle, 0);
  pool->Release("z");
  EXPECT_EQ(idle, 1);
  pool->Release("z");  // Nothing more to release: no second call.
  EXPECT_EQ(idle, 1);
}

TEST(StagePoolMembershipTest, RetiringAnIdleReplicaIsIdleAtOnce) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a});
  int idle = 0;
  pool->Retire(0, [&] { ++idle; });
  EXPECT_EQ(idle, 1);
  EXPECT_THAT(pool->LiveReplicas(), IsEmpty());
  EXPECT_FALSE(pool->Pick("x").ok());
}

TEST(StagePoolMembershipTest, ARetiredReplicaThatDiesIsIdle) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  int idle = 0;
  pool->Retire(0, [&] { ++idle; });
  EXPECT_THAT(pool->MarkDown(0, absl::UnavailableError("gone")), ElementsAre("x"));
  EXPECT_EQ(idle, 1);
}

TEST(StagePoolMembershipTest, AHandshakeDoesNotBringARetiredReplicaBack) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  pool->Retire(0, [] {});
  pool->Admit(0, ReadyOf("a-2"));  // Restarted on the same address.
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(1));
}

TEST(StagePoolMembershipTest, UnretiredReplicaIsPickedAgainAndNeverCallsIdle) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  int idle = 0;
  pool->Retire(0, [&] { ++idle; });
  pool->Unretire(0);
  pool->Release("x");
  EXPECT_EQ(idle, 0);
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(0, 1));
}

TEST(StagePoolMembershipTest, RemovedReplicaLeavesStatusAndUtilitiesAndItsIndexStays) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  pool->Retire(0, [] {});
  pool->Remove(0);
  EXPECT_THAT(ListedReplicas(*pool), ElementsAre(1));
  EXPECT_EQ(pool->Add(&c, "c:1", "dns:s"), 2);  // Not 0: indices are not reused.
  pool->Admit(2, ReadyOf("c-1"));
  EXPECT_THAT(ListedReplicas(*pool), ElementsAre(1, 2));
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(1, 2));

  std::vector<int> answered;
  pool->CallUtility("stats", {}, [&](UtilityResults results) {
    for (const auto& [replica, value] : results) answered.push_back(replica);
  });
  EXPECT_THAT(answered, ElementsAre(1, 2));
  EXPECT_THAT(log, ElementsAre("B.utility stats", "C.utility stats"));
}

TEST(StagePoolMembershipTest, StatusNamesOriginAndDiscoveryError) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {});
  pool->Add(&a, "[fd00::5]:9000", "dns:talker.omni.svc");
  pool->set_discovery_error("lookup of talker.omni.svc: timed out");
  v1::StageStatus status;
  pool->AppendStatus(&status, absl::Now());
  ASSERT_EQ(status.replicas_size(), 1);
  EXPECT_EQ(status.replicas(0).origin(), "dns:talker.omni.svc");
  EXPECT_EQ(status.replicas(0).address(), "[fd00::5]:9000");
  EXPECT_EQ(status.replicas(0).state(), v1::ReplicaStatus::STATE_DEAD);
  EXPECT_EQ(status.discovery_error(), "lookup of talker.omni.svc: timed out");
}

}  // namespace
}  // namespace stage_pool_test
}  // namespace omnistage
