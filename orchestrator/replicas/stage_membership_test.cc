// Tests for StageMembership: a stage's replicas follow discovery's answers.
// New addresses join (dead until their handshake, appended after the others),
// addresses that leave retire and are removed once their requests ended, an
// address that returns before its removal is wanted again, a failed or empty
// lookup changes nothing, and a family whose lookup fails keeps its replicas.
#include "orchestrator/replicas/stage_membership.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/host_port.h"
#include "common/testing/manual_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/discovery/dns_families.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// Makes FakeReplicaClients and records what was asked of it.
class FakeFactory : public ReplicaFactory {
 public:
  ReplicaClient* Create(int stage, int replica, const std::string& address) override {
    events.push_back("create " + std::to_string(replica) + " " + address);
    auto client = std::make_unique<FakeReplicaClient>(address, &log);
    ReplicaClient* raw = client.get();
    clients[replica] = std::move(client);
    return raw;
  }
  void Start(int stage, int replica) override {
    events.push_back("start " + std::to_string(replica));
  }
  void Destroy(int stage, int replica) override {
    events.push_back("destroy " + std::to_string(replica));
    clients.erase(replica);
  }

  std::vector<std::string> events;
  std::vector<std::string> log;
  std::map<int, std::unique_ptr<FakeReplicaClient>> clients;
};

v1::Ready ReadyOf(const std::string& instance) {
  v1::Ready ready;
  ready.set_instance_id(instance);
  ready.set_capacity(8);
  return ready;
}

class StageMembershipTest : public ::testing::Test {
 protected:
  using Addresses = std::vector<std::string>;

  // Applies an answer and admits every replica it created (their handshakes).
  void Answer(const Addresses& addresses) {
    const int before = pool_->size();
    membership_.Apply(addresses);
    for (int r = before; r < pool_->size(); ++r) pool_->Admit(r, ReadyOf("i" + std::to_string(r)));
    scheduler_.RunPending();
  }

  ManualScheduler scheduler_;
  FakeFactory factory_;
  std::shared_ptr<StagePool> pool_ = std::make_shared<StagePool>(1, std::vector<ReplicaClient*>{});
  StageMembership membership_{pool_, "stage 1 (talker)", "dns:talker", &factory_, &scheduler_};
};

TEST_F(StageMembershipTest, NewAddressesJoinDeadUntilTheirHandshake) {
  membership_.Apply(Addresses{"10.0.0.2:9000", "10.0.0.1:9000"});
  EXPECT_THAT(factory_.events, ElementsAre("create 0 10.0.0.1:9000", "start 0",
                                           "create 1 10.0.0.2:9000", "start 1"));
  EXPECT_THAT(pool_->LiveReplicas(), IsEmpty());
  EXPECT_EQ(pool_->state(0).origin, "dns:talker");
  pool_->Admit(1, ReadyOf("b"));
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(1));
  EXPECT_THAT(membership_.members(), ElementsAre(Pair("10.0.0.1:9000", 0), Pair("10.0.0.2:9000", 1)));
}

TEST_F(StageMembershipTest, AScaleUpAppendsAndKeepsBindings) {
  Answer({"a:1"});
  ASSERT_TRUE(pool_->Pick("x").ok());
  Answer({"a:1", "b:1", "c:1"});
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(0, 1, 2));
  EXPECT_EQ(pool_->Bound("x"), 0);
  // The round robin goes on over the longer live list: rr was 1.
  EXPECT_EQ(*pool_->Pick("y"), 1);
  EXPECT_EQ(*pool_->Pick("z"), 2);
  EXPECT_EQ(*pool_->Pick("w"), 0);
}

TEST_F(StageMembershipTest, ALeavingAddressDrainsItsRequestsThenIsRemoved) {
  Answer({"a:1", "b:1"});
  ASSERT_EQ(*pool_->Pick("x"), 0);
  ASSERT_EQ(*pool_->Pick("y"), 1);
  Answer({"b:1"});
  EXPECT_TRUE(pool_->state(0).retiring);
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(1));
  EXPECT_EQ(pool_->Bound("x"), 0);  // Its request goes on.
  EXPECT_EQ(*pool_->Pick("z"), 1);
  EXPECT_THAT(factory_.events, ::testing::Not(::testing::Contains("destroy 0")));

  pool_->Release("x");  // Its last request ended.
  EXPECT_FALSE(pool_->state(0).removed);  // Removal waits for a later turn.
  scheduler_.RunPending();
  EXPECT_TRUE(pool_->state(0).removed);
  EXPECT_THAT(factory_.events.back(), "destroy 0");
  EXPECT_EQ(factory_.clients.count(0), 0u);
  EXPECT_THAT(membership_.members(), ElementsAre(Pair("b:1", 1)));
}

TEST_F(StageMembershipTest, AnIdleLeavingAddressIsRemovedOnTheNextTurn) {
  Answer({"a:1", "b:1"});
  membership_.Apply(Addresses{"a:1"});
  EXPECT_TRUE(pool_->state(1).retiring);
  scheduler_.RunPending();
  EXPECT_TRUE(pool_->state(1).removed);
  v1::StageStatus status;
  pool_->AppendStatus(&status, absl::Now());
  ASSERT_EQ(status.replicas_size(), 1);
  EXPECT_EQ(status.replicas(0).address(), "a:1");
}

TEST_F(StageMembershipTest, ALeavingReplicaThatDiesFailsOnlyItsRequestsAndIsRemoved) {
  Answer({"a:1", "b:1"});
  ASSERT_EQ(*pool_->Pick("x"), 0);
  ASSERT_EQ(*pool_->Pick("y"), 1);
  Answer({"b:1"});
  EXPECT_THAT(pool_->MarkDown(0, absl::UnavailableError("stream broke")), ElementsAre("x"));
  scheduler_.RunPending();
  EXPECT_TRUE(pool_->state(0).removed);
  EXPECT_EQ(pool_->Bound("y"), 1);
}

TEST_F(StageMembershipTest, AnAddressBackBeforeItsRemovalIsWantedAgain) {
  Answer({"a:1", "b:1"});
  ASSERT_EQ(*pool_->Pick("x"), 0);
  Answer({"b:1"});
  ASSERT_TRUE(pool_->state(0).retiring);
  Answer({"a:1", "b:1"});
  EXPECT_FALSE(pool_->state(0).retiring);
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(0, 1));
  pool_->Release("x");
  scheduler_.RunPending();
  EXPECT_FALSE(pool_->state(0).removed);
  EXPECT_EQ(pool_->size(), 2);  // No second replica for the same address.
}

TEST_F(StageMembershipTest, AnAddressBackAfterItsRemovalIsANewReplica) {
  Answer({"a:1", "b:1"});
  Answer({"b:1"});
  ASSERT_TRUE(pool_->state(0).removed);
  Answer({"a:1", "b:1"});
  EXPECT_EQ(pool_->size(), 3);  // Indices are never reused.
  EXPECT_THAT(membership_.members(), ElementsAre(Pair("a:1", 2), Pair("b:1", 1)));
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(1, 2));
}

TEST_F(StageMembershipTest, AFailedLookupKeepsTheKnownSetAndIsShown) {
  Answer({"a:1", "b:1"});
  ASSERT_EQ(*pool_->Pick("x"), 0);
  membership_.Apply(absl::UnavailableError("DNS server refused"));
  membership_.Apply(absl::NotFoundError("talker.test: no such name"));
  scheduler_.RunPending();
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(0, 1));
  EXPECT_EQ(pool_->Bound("x"), 0);
  v1::StageStatus status;
  pool_->AppendStatus(&status, absl::Now());
  EXPECT_EQ(status.discovery_error(), "talker.test: no such name");

  Answer({"a:1", "b:1"});
  status.Clear();
  pool_->AppendStatus(&status, absl::Now());
  EXPECT_EQ(status.discovery_error(), "");
}

TEST_F(StageMembershipTest, AnEmptyAnswerEvictsNothing) {
  Answer({"a:1"});
  membership_.Apply(Addresses{});
  scheduler_.RunPending();
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(0));
  EXPECT_FALSE(pool_->state(0).retiring);
}

// A name whose AAAA lookup fails, through the merge discovery applies
// (dns_families.h): the IPv6 replica stays live while the IPv4 ones follow the
// A answers; when the A lookup fails too, nothing changes.
TEST_F(StageMembershipTest, TheReplicasOfAFamilyWhoseLookupFailsStay) {
  DnsFamilies families("talker");
  auto apply = [&](const DnsAnswer& answer) {
    absl::StatusOr<std::vector<std::string>> ips = families.Update(answer);
    if (!ips.ok()) {
      membership_.Apply(ips.status());
      return;
    }
    Addresses addresses;
    for (const std::string& ip : *ips) addresses.push_back(FormatHostPort(ip, 9000));
    Answer(addresses);
  };
  DnsAnswer both;
  both.a.addresses = {"10.0.0.1"};
  both.aaaa.addresses = {"fd00::1"};
  apply(both);
  ASSERT_THAT(pool_->LiveReplicas(), ElementsAre(0, 1));
  ASSERT_THAT(membership_.members(),
              ElementsAre(Pair("10.0.0.1:9000", 0), Pair("[fd00::1]:9000", 1)));

  DnsAnswer aaaa_refused;
  aaaa_refused.a.addresses = {"10.0.0.2"};
  aaaa_refused.aaaa.status = absl::UnavailableError("DNS lookup of talker (AAAA): refused");
  apply(aaaa_refused);
  EXPECT_TRUE(pool_->state(0).removed);  // 10.0.0.1 left the A answer.
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(1, 2));
  EXPECT_THAT(membership_.members(),
              ElementsAre(Pair("10.0.0.2:9000", 2), Pair("[fd00::1]:9000", 1)));

  DnsAnswer both_failed = aaaa_refused;
  both_failed.a.status = absl::DeadlineExceededError("DNS lookup of talker (A): timeout");
  apply(both_failed);
  scheduler_.RunPending();
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(1, 2));
  v1::StageStatus status;
  pool_->AppendStatus(&status, absl::Now());
  EXPECT_EQ(status.discovery_error(),
            "DNS lookup of talker (A): timeout; DNS lookup of talker (AAAA): refused");
}

TEST_F(StageMembershipTest, ARestartOnTheSameAddressIsANewIncarnation) {
  Answer({"a:1"});
  ASSERT_EQ(*pool_->Pick("x"), 0);
  EXPECT_THAT(pool_->MarkDown(0, absl::UnavailableError("stream broke")), ElementsAre("x"));
  pool_->Admit(0, ReadyOf("a-second"));
  EXPECT_THAT(pool_->LiveReplicas(), ElementsAre(0));
  EXPECT_EQ(pool_->state(0).instance_id, "a-second");
  EXPECT_EQ(pool_->BoundCount(0), 0);
  EXPECT_EQ(pool_->size(), 1);
}

}  // namespace
}  // namespace omnistage
