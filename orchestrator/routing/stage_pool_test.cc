// Tests for StagePool beyond the worked examples (those are in
// stage_pool_examples_test.cc): sticky round-robin over the live replicas, Bound and
// Release, eviction and revival, grouped aborts of unbound and duplicate ids, and
// aborts whose replica calls are still in flight while the pool changes. The
// replicas are FakeReplicaClients sharing one call log (testing/stage_pool_harness.h).
#include "orchestrator/routing/stage_pool.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/routing/replica_client.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "orchestrator/routing/testing/stage_pool_harness.h"

namespace omnistage {
namespace stage_pool_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

TEST(StagePoolTest, StickyPickDoesNotAdvanceRoundRobin) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  EXPECT_EQ(pool->Bound("q"), std::nullopt);
  // Had the sticky picks (or Bound) moved the counter, y would skip replica 1.
  EXPECT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("z"), IsOkAndHolds(2));
}

// Load(), for the stage's autoscaling signal: requests within a replica's
// capacity are held, the rest wait; dead replicas count for nothing; every
// binding made and ended is counted, also by an eviction and a re-bind.
TEST(StagePoolTest, LoadCountsHeldWaitingAndEveryBindingMadeAndEnded) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  v1::Ready ready;
  ready.set_capacity(2);
  pool->Admit(0, ready);
  pool->Admit(1, ready);
  pool->MarkDown(2, absl::UnavailableError("gone"));
  for (const char* id : {"p", "q", "r", "s", "t"}) ASSERT_TRUE(pool->Pick(id).ok());
  // Round robin over 0 and 1: p, r, t on 0; q, s on 1.
  StageLoad load = pool->Load();
  EXPECT_EQ(load.held, 4);
  EXPECT_EQ(load.waiting, 1);
  EXPECT_EQ(load.live_replicas, 2);
  EXPECT_EQ(load.capacity, 4);
  EXPECT_EQ(load.slots_per_replica, 2);
  EXPECT_EQ(load.entries, 5u);
  EXPECT_EQ(load.departures, 0u);
  pool->Release("p");
  pool->Evict(1);  // q and s
  load = pool->Load();
  EXPECT_EQ(load.held, 2);
  EXPECT_EQ(load.waiting, 0);
  EXPECT_EQ(load.live_replicas, 1);
  EXPECT_EQ(load.capacity, 2);
  EXPECT_EQ(load.departures, 3u);
  // Without a clock no busy time is counted.
  EXPECT_EQ(load.busy_slot_seconds, 0);
  // With no replica alive, one replica's slots are the last handshake's.
  pool->Evict(0);
  load = pool->Load();
  EXPECT_EQ(load.capacity, 0);
  EXPECT_EQ(load.slots_per_replica, 2);
  EXPECT_EQ(load.entries, 5u);
  EXPECT_EQ(load.departures, 5u);
}

// With a clock, the slots held within capacity over time, counted at every
// change: 2 held for 1 s, then 3 (capacity 2 + 1 of 4 on the other) for 2 s.
TEST(StagePoolTest, LoadCountsBusySlotSecondsAtEveryChange) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  absl::Time now = absl::FromUnixSeconds(100);
  pool->set_clock([&now] { return now; });
  v1::Ready two, four;
  two.set_capacity(2);
  four.set_capacity(4);
  pool->Admit(0, two);
  pool->Admit(1, four);
  ASSERT_THAT(pool->Pick("p"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("q"), IsOkAndHolds(1));
  now += absl::Seconds(1);
  ASSERT_THAT(pool->Pick("r"), IsOkAndHolds(0));  // 3 on replica 0: 2 held
  now += absl::Seconds(2);
  EXPECT_DOUBLE_EQ(pool->Load().busy_slot_seconds, 2 * 1 + 3 * 2);
  pool->Release("p");
  pool->Release("q");
  pool->Release("r");
  now += absl::Seconds(5);
  EXPECT_DOUBLE_EQ(pool->Load().busy_slot_seconds, 8);
}

TEST(StagePoolTest, BoundIsReadOnly) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a});
  EXPECT_EQ(pool->Bound("q"), std::nullopt);
  EXPECT_EQ(pool->Bound("q"), std::nullopt);
  EXPECT_EQ(pool->bindings(), 0u);
  EXPECT_EQ(pool->BoundCount(0), 0);
}

TEST(StagePoolTest, ReleaseForgetsBindingAndToleratesUnknownIds) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  pool->Release("never-picked");
  EXPECT_THAT(pool->Bound("x"), Optional(0));
  pool->Release("x");
  EXPECT_EQ(pool->Bound("x"), std::nullopt);
  pool->Release("x");
  EXPECT_EQ(pool->bindings(), 0u);
  // Release touches no replica: it is the normal end of a request.
  EXPECT_THAT(log, IsEmpty());
}

TEST(StagePoolTest, PickNeverReturnsADeadReplica) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<FakeReplicaClient>> fakes;
  std::vector<FakeReplicaClient*> raw;
  for (int i = 0; i < 5; ++i) {
    fakes.push_back(std::make_unique<FakeReplicaClient>("R" + std::to_string(i), &log));
    raw.push_back(fakes.back().get());
  }
  std::shared_ptr<StagePool> pool = MakePool(0, raw);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(pool->Pick("early" + std::to_string(i)).ok());
  pool->Evict(1);
  pool->Evict(3);

  std::map<int, int> per_replica;
  for (int i = 0; i < 300; ++i) {
    absl::StatusOr<int> replica = pool->Pick("late" + std::to_string(i));
    ASSERT_TRUE(replica.ok()) << replica.status();
    ASSERT_TRUE(pool->alive(*replica)) << "picked dead replica " << *replica;
    ++per_replica[*replica];
  }
  // Round-robin over the live list spreads fresh requests evenly.
  EXPECT_THAT(per_replica,
              ElementsAre(std::pair<const int, int>(0, 100), std::pair<const int, int>(2, 100),
                          std::pair<const int, int>(4, 100)));
  // Requests that were on the evicted replicas land on live ones when re-picked.
  for (int i = 0; i < 7; ++i) {
    absl::StatusOr<int> replica = pool->Pick("early" + std::to_string(i));
    ASSERT_TRUE(replica.ok()) << replica.status();
    EXPECT_TRUE(pool->alive(*replica)) << "early" << i << " on dead " << *replica;
  }
}

TEST(StagePoolTest, EvictReturnsSortedIdsAndEvictingAgainReturnsNothing) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  for (const char* rid : {"m", "k", "z", "a", "q"}) ASSERT_TRUE(pool->Pick(rid).ok());
  // m, z, q went to 0; k, a to 1.
  EXPECT_THAT(pool->Evict(0), ElementsAre("m", "q", "z"));
  EXPECT_THAT(pool->Evict(0), IsEmpty());
  EXPECT_FALSE(pool->alive(0));
  EXPECT_EQ(pool->BoundCount(1), 2);
}

TEST(StagePoolTest, ReviveMakesReplicaPickableWithNoBindings) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Evict(0), ElementsAre("x"));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(1));

  pool->Revive(0);
  EXPECT_TRUE(pool->alive(0));
  EXPECT_THAT(pool->LiveReplicas(), ElementsAre(0, 1));
  EXPECT_EQ(pool->BoundCount(0), 0);
  EXPECT_EQ(pool->Bound("x"), std::nullopt);
  // Replica 0 takes fresh requests again (rr is 3: live[3 % 2] = 1, then 0).
  EXPECT_THAT(pool->Pick("u"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("v"), IsOkAndHolds(0));
  EXPECT_EQ(pool->BoundCount(0), 1);
}

TEST(StagePoolTest, PoolCreatedDeadPicksNothingUntilRevived) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  auto pool = std::make_shared<StagePool>(3, std::vector<ReplicaClient*>{&a, &b},
                                          /*alive=*/false);
  EXPECT_THAT(pool->LiveReplicas(), IsEmpty());
  EXPECT_EQ(pool->Pick("x").status().code(), absl::StatusCode::kUnavailable);
  pool->Revive(1);
  EXPECT_THAT(pool->Pick("x"), IsOkAndHolds(1));
  EXPECT_THAT(pool->Pick("y"), IsOkAndHolds(1));
}

TEST(StagePoolTest, BoundCountFollowsPickReleaseAndAbort) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  for (const char* rid : {"r0", "r1", "r2", "r3", "r4"}) ASSERT_TRUE(pool->Pick(rid).ok());
  EXPECT_EQ(pool->BoundCount(0), 3);
  EXPECT_EQ(pool->BoundCount(1), 2);
  pool->Release("r0");
  EXPECT_EQ(pool->BoundCount(0), 2);
  DoneRecorder done;
  pool->Abort({"r1"}, kNoDeadline, done.Callback());
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(pool->BoundCount(1), 1);
  EXPECT_EQ(pool->bindings(), 3u);
}

// A pool that binds none of the ids calls no replica and still
// completes, so callers need no check of their own.
TEST(StagePoolTest, AbortOfUnboundIdsCallsNothingAndCompletesOk) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_TRUE(pool->Pick("bound").ok());

  DoneRecorder done;
  pool->Abort({"ghost", "phantom"}, kNoDeadline, done.Callback());
  EXPECT_THAT(log, IsEmpty());
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;

  DoneRecorder empty;
  pool->Abort({}, kNoDeadline, empty.Callback());
  EXPECT_THAT(log, IsEmpty());
  EXPECT_EQ(empty.calls, 1);
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_EQ(pool->bindings(), 1u);
}

TEST(StagePoolTest, AbortSendsDuplicateIdsOnceInTheOrderGiven) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  // p, r, t on A; q, s on B.
  for (const char* rid : {"p", "q", "r", "s", "t"}) ASSERT_TRUE(pool->Pick(rid).ok());

  DoneRecorder done;
  pool->Abort({"t", "s", "p", "t", "q", "r", "p", "s"}, kNoDeadline, done.Callback());
  EXPECT_THAT(log, ElementsAre("A.abort [t,p,r]", "B.abort [s,q]"));
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(pool->bindings(), 0u);
}

// Each answered call says how many of its ids the worker found live; the
// others had ended there already (the abort raced their end). Either way
// their bindings go; a failed call reports nothing.
TEST(StagePoolTest, AnAnsweredAbortSaysWhichIdsWereStillLive) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  // p, r on A; q, s on B.
  for (const char* rid : {"p", "q", "r", "s"}) ASSERT_TRUE(pool->Pick(rid).ok());
  std::vector<std::string> answers;
  pool->set_on_abort_answer([&answers](int replica, size_t stopped, size_t already_ended) {
    answers.push_back(
        absl::StrCat(replica, ": ", stopped, " stopped, ", already_ended, " already ended"));
  });
  a.set_ended_before_abort({"r"});
  b.FailAborts(absl::UnavailableError("B is gone"));
  DoneRecorder done;
  pool->Abort({"p", "q", "r", "s"}, kNoDeadline, done.Callback());
  EXPECT_THAT(answers, ElementsAre("0: 1 stopped, 1 already ended"));
  EXPECT_FALSE(pool->Bound("p").has_value());
  EXPECT_FALSE(pool->Bound("r").has_value());
  EXPECT_EQ(pool->Bound("q"), 1);  // Its call failed: still bound, to retry.
  EXPECT_EQ(done.calls, 1);
}

// Releasing before the replica confirmed would leave nothing to retry with, so a group stays bound
// while its call is in flight. Every group's call goes out at once; `done` waits for the last.
TEST(StagePoolTest, InFlightAbortKeepsBindingsUntilCompletion) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(0));
  a.set_hold_aborts(true);
  b.set_hold_aborts(true);

  DoneRecorder done;
  pool->Abort({"x", "y", "z"}, kNoDeadline, done.Callback());
  EXPECT_THAT(log, ElementsAre("A.abort [x,z]", "B.abort [y]"));
  EXPECT_THAT(pool->Bound("x"), Optional(0));
  EXPECT_THAT(pool->Bound("z"), Optional(0));
  EXPECT_THAT(pool->Bound("y"), Optional(1));
  EXPECT_EQ(done.calls, 0);

  ASSERT_TRUE(b.CompleteAbort(absl::OkStatus()));
  EXPECT_EQ(pool->Bound("y"), std::nullopt);
  EXPECT_THAT(pool->Bound("x"), Optional(0));
  EXPECT_EQ(done.calls, 0);

  ASSERT_TRUE(a.CompleteAbort(absl::OkStatus()));
  EXPECT_EQ(pool->Bound("x"), std::nullopt);
  EXPECT_EQ(pool->Bound("z"), std::nullopt);
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_EQ(a.held_aborts() + b.held_aborts(), 0u);
}

TEST(StagePoolTest, InFlightAbortThatFailsKeepsItsGroupBound) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  a.set_hold_aborts(true);

  DoneRecorder done;
  pool->Abort({"x"}, kNoDeadline, done.Callback());
  ASSERT_TRUE(a.CompleteAbort(absl::DeadlineExceededError("slow")));
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(done.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(pool->Bound("x"), Optional(0));
}

TEST(StagePoolTest, AbortCarriesItsDeadlineToEveryCall) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_TRUE(pool->Pick("x").ok());
  ASSERT_TRUE(pool->Pick("y").ok());
  const absl::Time deadline = absl::FromUnixSeconds(1234);
  DoneRecorder done;
  pool->Abort({"x", "y"}, deadline, done.Callback());
  EXPECT_THAT(a.abort_deadlines(), ElementsAre(deadline));
  EXPECT_THAT(b.abort_deadlines(), ElementsAre(deadline));
}

// The replica dies while its abort is in flight and the request is picked again
// onto another replica: the late completion must not drop the new binding.
TEST(StagePoolTest, EvictDuringInFlightAbortKeepsRebindingElsewhere) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(0));
  a.set_hold_aborts(true);

  DoneRecorder done;
  pool->Abort({"x", "z"}, kNoDeadline, done.Callback());
  EXPECT_THAT(log, ElementsAre("A.abort [x,z]"));
  EXPECT_THAT(pool->Evict(0), ElementsAre("x", "z"));
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(1));

  ASSERT_TRUE(a.CompleteAbort(absl::OkStatus()));
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_THAT(pool->Bound("x"), Optional(1));
  EXPECT_THAT(pool->Bound("y"), Optional(1));
  EXPECT_EQ(pool->Bound("z"), std::nullopt);
  EXPECT_THAT(b.aborts(), IsEmpty());
}

// A replica whose call failed dies before the run ends: its requests already got
// their terminal error through Evict, so its failure must not fail the abort of
// requests on healthy replicas.
TEST(StagePoolTest, FailedGroupEvictedBeforeTheRunEndsIsNoFailure) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(2));
  a.set_hold_aborts(true);
  b.FailAborts(absl::UnavailableError("B is gone"));

  DoneRecorder done;
  pool->Abort({"x", "y", "z"}, kNoDeadline, done.Callback());
  ASSERT_THAT(pool->Evict(1), ElementsAre("y"));
  ASSERT_TRUE(a.CompleteAbort(absl::OkStatus()));

  EXPECT_THAT(log, ElementsAre("A.abort [x]", "B.abort [y]", "C.abort [z]"));
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_THAT(done.failures, IsEmpty());
  EXPECT_EQ(pool->bindings(), 0u);
}

// A request that ends normally while its replica's call is in flight is not
// released twice, and the others of its group are.
TEST(StagePoolTest, ReleaseDuringInFlightAbortIsTolerated) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("z"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("w"), IsOkAndHolds(1));
  b.set_hold_aborts(true);

  DoneRecorder done;
  pool->Abort({"x", "y", "w"}, kNoDeadline, done.Callback());
  pool->Release("y");
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(0));  // A new use of the id, elsewhere.
  ASSERT_TRUE(b.CompleteAbort(absl::OkStatus()));

  EXPECT_THAT(log, ElementsAre("A.abort [x]", "B.abort [y,w]"));
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  EXPECT_THAT(pool->Bound("z"), Optional(0));
  EXPECT_THAT(pool->Bound("y"), Optional(0));
  EXPECT_EQ(pool->bindings(), 2u);
}

// The id is bound again to the same replica while a call for its old binding
// is in flight (the replica came back as a new incarnation, and a client reused
// the id): the late answer is about the old request only. Found by
// fuzz/pipeline_core_fuzzer.
TEST(StagePoolTest, InFlightAbortDoesNotAnswerForANewBindingOnTheSameReplica) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(0));
  a.set_hold_aborts(true);

  DoneRecorder ok, failed;
  pool->Abort({"x"}, kNoDeadline, ok.Callback());
  pool->Abort({"y"}, kNoDeadline, failed.Callback());
  pool->Revive(0);
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(0));
  ASSERT_TRUE(a.CompleteAbort(absl::OkStatus()));
  ASSERT_TRUE(a.CompleteAbort(absl::DeadlineExceededError("late")));

  EXPECT_EQ(ok.calls, 1);
  EXPECT_EQ(failed.calls, 1);
  EXPECT_TRUE(failed.status.ok()) << failed.status;
  EXPECT_THAT(pool->Bound("x"), Optional(0));
  EXPECT_THAT(pool->Bound("y"), Optional(0));
}

// ---- Sends --------------------------------------------------------------------------

v1::AddRequest AddOf(const std::string& id) {
  v1::AddRequest add;
  add.set_request_id(id);
  add.add_input()->mutable_text()->set_text("hello");
  return add;
}

// The kill race: a replica whose session closed before its eviction reached the
// pool is evicted on the spot, and the request goes to the next live replica.
TEST(StagePoolTest, SubmitEvictsAReplicaFoundDeadAndPicksAgain) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  ASSERT_THAT(pool->Pick("old"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(2));
  a.FailCommands(absl::UnavailableError("session closed"));

  // Round robin comes to A again; A is dead, so B (live[4 % 2]) takes it.
  v1::AddRequest add = AddOf("new");
  SubmitResult sent = pool->Submit(&add);
  ASSERT_TRUE(sent.status.ok()) << sent.status;
  EXPECT_EQ(sent.replica, 1);
  EXPECT_THAT(log, ElementsAre("A.add new failed", "B.add new"));
  ASSERT_EQ(b.adds().size(), 1u);
  EXPECT_EQ(b.adds()[0].input(0).text().text(), "hello") << "the retry lost the input";
  ASSERT_EQ(sent.lost.size(), 1u);
  EXPECT_EQ(sent.lost[0].replica, 0);
  EXPECT_THAT(sent.lost[0].evicted, ElementsAre("old"));
  EXPECT_FALSE(pool->alive(0));
  EXPECT_EQ(pool->state(0).last_error, "session closed");
  EXPECT_THAT(pool->Bound("new"), Optional(1));
}

TEST(StagePoolTest, SubmitWithEveryReplicaDeadIsUnavailableAndLeavesNoBinding) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  a.FailCommands(absl::UnavailableError("gone"));
  b.FailCommands(absl::UnavailableError("gone too"));
  v1::AddRequest add = AddOf("r");
  SubmitResult sent = pool->Submit(&add);
  EXPECT_EQ(sent.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(sent.replica, -1);
  EXPECT_EQ(sent.lost.size(), 2u);
  EXPECT_EQ(pool->bindings(), 0u);
}

// A command too large for the replica is the request's fault: the replica stays.
TEST(StagePoolTest, SubmitRefusedAsTooLargeKeepsTheReplicaAlive) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  a.FailCommands(absl::ResourceExhaustedError("the command is 17 MB"));
  v1::AddRequest add = AddOf("big");
  SubmitResult sent = pool->Submit(&add);
  EXPECT_EQ(sent.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(sent.replica, 0);
  EXPECT_THAT(sent.lost, IsEmpty());
  EXPECT_TRUE(pool->alive(0));
  EXPECT_EQ(pool->bindings(), 0u);
}

TEST(StagePoolTest, AppendGoesToTheBoundReplicaAndReportsItsLoss) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b});
  ASSERT_THAT(pool->Pick("x"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("y"), IsOkAndHolds(1));
  v1::AppendInput append;
  append.set_request_id("y");
  std::optional<ReplicaLoss> lost;
  EXPECT_TRUE(pool->Append(append, &lost).ok());
  EXPECT_THAT(log, ElementsAre("B.append y"));
  EXPECT_FALSE(lost.has_value());

  append.set_request_id("nowhere");
  EXPECT_EQ(pool->Append(append, &lost).code(), absl::StatusCode::kNotFound);

  b.FailCommands(absl::UnavailableError("stream broke"));
  append.set_request_id("y");
  EXPECT_EQ(pool->Append(append, &lost).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->replica, 1);
  EXPECT_THAT(lost->evicted, ElementsAre("y"));
  EXPECT_FALSE(pool->alive(1));
}

}  // namespace
}  // namespace stage_pool_test
}  // namespace omnistage
