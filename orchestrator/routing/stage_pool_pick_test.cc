// StagePool's load-aware picking (PickPolicy::kLeastLoaded): the workers'
// reported load per capacity decides a request's first replica, ties go round
// robin, and a bound request stays where it is. The prefix-aware pick
// (kPrefixAware) through the pool: follow-ups meet their prefix, precise
// replicas follow their workers' reports; and session affinity under every
// policy.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/prefix_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "orchestrator/routing/testing/stage_pool_harness.h"

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

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

google::protobuf::RepeatedPtrField<v1::Payload> Prompt(const std::string& text) {
  google::protobuf::RepeatedPtrField<v1::Payload> input;
  input.Add()->mutable_text()->set_text(text);
  return input;
}

// A pool of three admitted replicas of capacity 8.
std::shared_ptr<StagePool> PoolOfThree(std::vector<FakeReplicaClient*> fakes, PickPolicy pick,
                                       const v1::Ready& ready = v1::Ready()) {
  std::shared_ptr<StagePool> pool = MakePool(0, std::move(fakes));
  PrefixPickOptions prefix;
  prefix.block_tokens = 4;
  pool->set_pick(pick, prefix);
  v1::Ready admitted = ready;
  admitted.set_capacity(8);
  for (int r = 0; r < 3; ++r) pool->Admit(r, admitted);
  return pool;
}

TEST(StagePoolPickTest, PrefixAwareFollowUpsLandWhereTheirPrefixWent) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = PoolOfThree({&a, &b, &c}, PickPolicy::kPrefixAware);
  std::vector<PickDecision> picks;
  pool->set_on_pick([&](const PickDecision& pick) { picks.push_back(pick); });
  const std::string one(16 * 40, '1'), two(16 * 40, '2');
  auto input_one = Prompt(one), input_two = Prompt(two);
  // Nothing cached: the first two conversations spread (round-robin order).
  EXPECT_THAT(pool->Pick("one-1", {"", &input_one, kT0}), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("two-1", {"", &input_two, kT0}), IsOkAndHolds(1));
  EXPECT_STREQ(picks[0].why, "no_match");
  // Their next turns (history + a new message) follow them, loads being even.
  pool->ReportLoad(0, 0, kT0);
  pool->ReportLoad(1, 0, kT0);
  auto next_two = Prompt(two + " and then?"), next_one = Prompt(one + " why?");
  EXPECT_THAT(pool->Pick("two-2", {"", &next_two, kT0}), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("one-2", {"", &next_one, kT0}), IsOkAndHolds(0));
  EXPECT_STREQ(picks[3].why, "prefix");
  EXPECT_EQ(picks[3].matched_tokens, 160);
  EXPECT_EQ(picks[3].input_tokens, (16 * 40 + 5) / 4);
  // Status says how the orchestrator knows.
  v1::StageStatus status;
  pool->AppendStatus(&status, kT0);
  EXPECT_EQ(status.replicas(0).prefix_index(), "approximate");
  EXPECT_EQ(status.replicas(0).prefix_blocks(), 40);
  // A replica that goes down comes back cold.
  pool->MarkDown(0, absl::UnavailableError("gone"));
  v1::Ready again;
  again.set_capacity(8);
  pool->Admit(0, again);
  EXPECT_EQ(pool->prefix_index().blocks(0), 0);
}

TEST(StagePoolPickTest, PrefixAwareReadsAReportingReplicaPrecisely) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  v1::Ready ready;
  ready.mutable_prefix_cache()->set_block_tokens(4);
  ready.mutable_prefix_cache()->set_capacity_blocks(100);
  const std::string shared(16 * 20, 's');
  const std::vector<uint64_t> blocks = TextBlockHashes(shared, 4);
  // Replica 2's Ready already lists the shared prompt (its snapshot).
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  PrefixPickOptions prefix;
  prefix.block_tokens = 4;
  pool->set_pick(PickPolicy::kPrefixAware, prefix);
  for (int r = 0; r < 3; ++r) {
    v1::Ready admitted = ready;
    admitted.set_capacity(8);
    if (r == 2) {
      admitted.mutable_load()->mutable_cache()->set_snapshot(true);
      for (uint64_t block : blocks) admitted.mutable_load()->mutable_cache()->add_stored(block);
    }
    pool->Admit(r, admitted);
  }
  auto input = Prompt(shared + " hello");
  EXPECT_THAT(pool->Pick("x", {"", &input, kT0}), IsOkAndHolds(2));
  // Sending there does not make it hold more: only its reports do.
  EXPECT_EQ(pool->prefix_index().blocks(2), 20);
  // The worker evicts the shared prompt: the next pick no longer goes there
  // for it (replica 1, first in the round-robin order, at equal load).
  v1::CacheEvents evicted;
  for (uint64_t block : blocks) evicted.add_evicted(block);
  pool->ReportCache(2, evicted);
  pool->ReportLoad(2, 0, kT0);
  EXPECT_THAT(pool->Pick("y", {"", &input, kT0}), IsOkAndHolds(1));
  v1::StageStatus status;
  pool->AppendStatus(&status, kT0);
  EXPECT_EQ(status.replicas(2).prefix_index(), "precise");
  EXPECT_EQ(status.replicas(2).prefix_blocks(), 0);
}

TEST(StagePoolPickTest, ASessionGoesBackToItsReplicaWhileItHasRoom) {
  for (PickPolicy policy :
       {PickPolicy::kRoundRobin, PickPolicy::kLeastLoaded, PickPolicy::kPrefixAware}) {
    std::vector<std::string> log;
    FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
    std::shared_ptr<StagePool> pool = PoolOfThree({&a, &b, &c}, policy);
    std::vector<std::string> why;
    pool->set_on_pick([&](const PickDecision& pick) { why.push_back(pick.why); });
    EXPECT_THAT(pool->Pick("s1", {"alice", nullptr, kT0}), IsOkAndHolds(0));
    EXPECT_THAT(pool->Pick("other", {"", nullptr, kT0}), IsOkAndHolds(1));
    // Alice's next request goes back to 0, though the policy would say 2.
    EXPECT_THAT(pool->Pick("s2", {"alice", nullptr, kT0}), IsOkAndHolds(0));
    EXPECT_EQ(why.back(), "session");
    // Replica 0 full (8 of 8): the policy decides (round robin may choose it
    // again), and the session follows.
    pool->ReportLoad(0, 8, kT0);
    pool->Pick("s3", {"alice", nullptr, kT0}).IgnoreError();
    EXPECT_NE(why.back(), "session");
    pool->ReportLoad(0, 0, kT0);
    pool->Drain(0);
    const absl::StatusOr<int> moved = pool->Pick("s3b", {"alice", nullptr, kT0});
    ASSERT_TRUE(moved.ok());
    EXPECT_NE(*moved, 0);
    EXPECT_THAT(pool->Pick("s4", {"alice", nullptr, kT0}), IsOkAndHolds(*moved));
    EXPECT_EQ(why.back(), "session");
    // Not live: likewise.
    pool->Drain(*moved);
    const absl::StatusOr<int> again = pool->Pick("s5", {"alice", nullptr, kT0});
    ASSERT_TRUE(again.ok());
    EXPECT_NE(*again, *moved);
    // Forgotten after 30 idle minutes.
    EXPECT_THAT(pool->Pick("s6", {"alice", nullptr, kT0 + absl::Minutes(29)}),
                IsOkAndHolds(*again));
    const absl::Time late = kT0 + absl::Minutes(60);
    pool->Pick("s7", {"alice", nullptr, late}).IgnoreError();
    EXPECT_NE(why.back(), "session");
  }
}

TEST(StagePoolPickTest, WithoutASessionRoundRobinIsUnchanged) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = PoolOfThree({&a, &b, &c}, PickPolicy::kRoundRobin);
  auto input = Prompt(std::string(16 * 10, 'x'));
  for (int i = 0; i < 7; ++i) {
    EXPECT_THAT(pool->Pick(absl::StrCat("r", i), {"", &input, kT0}), IsOkAndHolds(i % 3));
  }
  EXPECT_EQ(pool->prefix_index().blocks(0), 0);  // No index without the policy.
}

}  // namespace
}  // namespace stage_pool_test
}  // namespace omnistage
