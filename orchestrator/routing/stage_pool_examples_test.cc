// Tests for StagePool against its worked examples (docs/architecture.md, Worked
// examples): the three examples re-expressed step by step, including the orchestrator's two-phase
// abort (collect, abort every stage, commit) and the dead-replica handling built on
// the pool. Edge cases of picking, eviction and in-flight aborts are in
// stage_pool_test.cc; the shared helpers are in testing/stage_pool_harness.h.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/routing/stage_pool.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "orchestrator/routing/testing/stage_pool_harness.h"

namespace omnistage {
namespace stage_pool_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

// A terminal output as the worked examples write it: OrchOutput(request_id, data, finished,
// error), with no stage field.
struct OrchOutput {
  std::string request_id;
  std::optional<std::string> data;
  bool finished = false;
  std::string error;

  bool operator==(const OrchOutput& other) const {
    return request_id == other.request_id && data == other.data &&
           finished == other.finished && error == other.error;
  }
};

void PrintTo(const OrchOutput& out, std::ostream* os) {
  *os << "OrchOutput(" << out.request_id << ", "
      << (out.data.has_value() ? "\"" + *out.data + "\"" : std::string("None")) << ", "
      << (out.finished ? "finished" : "unfinished") << ", \"" << out.error << "\")";
}

// The orchestrator-side partial results of example 3: collect is
// read-only, commit forgets the request. Both calls go into the shared log.
class FakeProcessor {
 public:
  explicit FakeProcessor(std::vector<std::string>* log) : log_(log) {}

  void SetPartial(const std::string& rid, std::string text) { partials_[rid] = std::move(text); }
  bool Holds(const std::string& rid) const { return partials_.count(rid) > 0; }

  std::optional<std::string> CollectPartial(const std::string& rid) {
    log_->push_back("collect_partial " + rid);
    auto it = partials_.find(rid);
    if (it == partials_.end()) return std::nullopt;
    return it->second;
  }

  void CommitAbort(const std::string& rid) {
    log_->push_back("commit_abort " + rid);
    partials_.erase(rid);
  }

 private:
  std::vector<std::string>* const log_;
  std::map<std::string, std::string> partials_;
};

// The two-phase abort of one request, in the pool's callback style:
//   1. collect the partial output (read-only);
//   2. each pool's Abort({rid}), one pool after another; a failure stops here and is
//      handed to `done` with nothing committed;
//   3. commit (irreversible, so only after every abort that can fail);
//   4. exactly one terminal output (rid, partial, finished, error="abort").
struct TwoPhaseAbort {
  std::vector<std::shared_ptr<StagePool>> pools;
  FakeProcessor* processor;
  std::string rid;
  std::optional<std::string> partial;
  std::function<void(absl::StatusOr<OrchOutput>)> done;
};

void AbortStagesFrom(std::shared_ptr<TwoPhaseAbort> op, size_t next) {
  if (next == op->pools.size()) {
    op->processor->CommitAbort(op->rid);
    op->done(OrchOutput{op->rid, op->partial, true, "abort"});
    return;
  }
  op->pools[next]->Abort({op->rid}, kNoDeadline, [op, next](PoolAbortResult result) {
    if (!result.failures.empty()) {
      op->done(result.status());
      return;
    }
    AbortStagesFrom(op, next + 1);
  });
}

void AbortRequest(std::vector<std::shared_ptr<StagePool>> pools, FakeProcessor* processor,
                  const std::string& rid, std::function<void(absl::StatusOr<OrchOutput>)> done) {
  auto op = std::make_shared<TwoPhaseAbort>();
  op->pools = std::move(pools);
  op->processor = processor;
  op->rid = rid;
  op->done = std::move(done);
  // Collect comes first: after the commit the partial text is gone.
  op->partial = processor->CollectPartial(rid);
  AbortStagesFrom(std::move(op), 0);
}

// A dead replica's handling: evict, then exactly one terminal error per
// request that was bound to the dead replica (data None).
std::vector<OrchOutput> HandleDeadReplica(StagePool& pool, int replica) {
  std::vector<OrchOutput> outputs;
  const std::string reason = "stage " + std::to_string(pool.stage_id()) + " replica " +
                             std::to_string(replica) + " died";
  for (const std::string& rid : pool.Evict(replica)) {
    outputs.push_back(OrchOutput{rid, std::nullopt, true, reason});
  }
  return outputs;
}

// Examples 1 and 2, one state-table step at a time.
TEST(StagePoolTest, WorkedExamplesOneAndTwo) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> p = MakePool(1, {&a, &b, &c});

  // 1. Initial: all alive, no bindings.
  EXPECT_THAT(p->LiveReplicas(), ElementsAre(0, 1, 2));
  EXPECT_EQ(p->bindings(), 0u);

  // 2. Fresh picks go round-robin: x, y, z, w -> 0, 1, 2, 0 (rr ends at 4).
  EXPECT_THAT(p->Pick("x"), IsOkAndHolds(0));
  EXPECT_THAT(p->Pick("y"), IsOkAndHolds(1));
  EXPECT_THAT(p->Pick("z"), IsOkAndHolds(2));
  EXPECT_THAT(p->Pick("w"), IsOkAndHolds(0));
  EXPECT_EQ(p->bindings(), 4u);

  // 3. Sticky hit: x stays on 0 and rr stays 4 (step 5 proves it: with rr at 5,
  // y would land on live[5 % 2] = 2). Bound() is read-only.
  EXPECT_THAT(p->Pick("x"), IsOkAndHolds(0));
  EXPECT_EQ(p->Bound("q"), std::nullopt);
  EXPECT_EQ(p->bindings(), 4u);

  // 4. Evict 1: returns the requests it held; its bindings are gone.
  EXPECT_THAT(p->Evict(1), ElementsAre("y"));
  EXPECT_THAT(p->LiveReplicas(), ElementsAre(0, 2));
  EXPECT_EQ(p->Bound("y"), std::nullopt);
  EXPECT_THAT(p->Bound("x"), Optional(0));
  EXPECT_THAT(p->Bound("z"), Optional(2));
  EXPECT_THAT(p->Bound("w"), Optional(0));

  // 5. Modulo over the live list [0, 2]: y -> live[4 % 2] = 0, v -> live[5 % 2] = 2.
  EXPECT_THAT(p->Pick("y"), IsOkAndHolds(0));
  EXPECT_THAT(p->Pick("v"), IsOkAndHolds(2));
  EXPECT_EQ(p->bindings(), 5u);

  // 6. One call per replica, ids in the order given, ghost ignored, B not called.
  DoneRecorder done;
  p->Abort({"x", "z", "w", "ghost", "v"}, kNoDeadline, done.Callback());
  EXPECT_THAT(log, ElementsAre("A.abort [x,w]", "C.abort [z,v]"));
  EXPECT_THAT(b.aborts(), IsEmpty());
  EXPECT_EQ(done.calls, 1);
  EXPECT_TRUE(done.status.ok()) << done.status;
  for (const char* rid : {"x", "z", "w", "v", "ghost"}) {
    EXPECT_EQ(p->Bound(rid), std::nullopt) << rid;
  }
  EXPECT_THAT(p->Bound("y"), Optional(0));
  EXPECT_EQ(p->bindings(), 1u);
}

// Example 2, step 7: A's group is released, B's failure propagates and keeps n
// bound; once B recovers, the retry calls only B.
TEST(StagePoolTest, WorkedFailureSemanticsAndRetry) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log);
  std::shared_ptr<StagePool> q = MakePool(1, {&a, &b});
  ASSERT_THAT(q->Pick("m"), IsOkAndHolds(0));
  ASSERT_THAT(q->Pick("n"), IsOkAndHolds(1));
  ASSERT_THAT(q->Pick("o"), IsOkAndHolds(0));
  b.FailAborts(absl::UnavailableError("B is down"));

  DoneRecorder failed;
  q->Abort({"m", "n", "o"}, kNoDeadline, failed.Callback());
  EXPECT_THAT(log, ElementsAre("A.abort [m,o]", "B.abort [n]"));
  EXPECT_EQ(failed.calls, 1);
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(failed.status.message()), HasSubstr("B is down"));
  EXPECT_EQ(q->Bound("m"), std::nullopt);
  EXPECT_EQ(q->Bound("o"), std::nullopt);
  EXPECT_THAT(q->Bound("n"), Optional(1));

  log.clear();
  b.FailAborts(absl::OkStatus());
  DoneRecorder retried;
  q->Abort({"m", "n", "o"}, kNoDeadline, retried.Callback());
  EXPECT_THAT(log, ElementsAre("B.abort [n]"));
  EXPECT_EQ(retried.calls, 1);
  EXPECT_TRUE(retried.status.ok()) << retried.status;
  EXPECT_EQ(q->bindings(), 0u);
}

// A failed group does not hold the others back: every replica is called (the
// rule: a failed group stays bound, the groups that succeeded are released), so a batch
// abort of many requests is not hostage to one replica. The failure names the
// replica and the ids it still holds, ready for a retry of just those.
TEST(StagePoolTest, AbortFailureKeepsOnlyTheFailedGroupBound) {
  std::vector<std::string> log;
  FakeReplicaClient a("A", &log), b("B", &log), c("C", &log);
  std::shared_ptr<StagePool> pool = MakePool(0, {&a, &b, &c});
  ASSERT_THAT(pool->Pick("r0"), IsOkAndHolds(0));
  ASSERT_THAT(pool->Pick("r1"), IsOkAndHolds(1));
  ASSERT_THAT(pool->Pick("r2"), IsOkAndHolds(2));
  b.FailAborts(absl::InternalError("boom"));

  DoneRecorder done;
  pool->Abort({"r2", "r1", "r0"}, kNoDeadline, done.Callback());
  // Replica order, not id order.
  EXPECT_THAT(log, ElementsAre("A.abort [r0]", "B.abort [r1]", "C.abort [r2]"));
  EXPECT_EQ(done.calls, 1);
  EXPECT_EQ(done.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(done.status.message()), HasSubstr("stage 0 replica 1: abort failed"));
  ASSERT_EQ(done.failures.size(), 1u);
  EXPECT_EQ(done.failures[0].replica, 1);
  EXPECT_THAT(done.failures[0].ids, ElementsAre("r1"));
  EXPECT_EQ(pool->Bound("r0"), std::nullopt);
  EXPECT_THAT(pool->Bound("r1"), Optional(1));
  EXPECT_EQ(pool->Bound("r2"), std::nullopt);
}

// Example 3: collect -> every stage's abort, in pipeline order -> commit -> one
// terminal output carrying the partial text.
TEST(StagePoolTest, WorkedTwoPhaseAbortOrder) {
  std::vector<std::string> log;
  FakeReplicaClient t0("T0", &log);
  FakeReplicaClient k0("K0", &log), k1("K1", &log);
  FakeReplicaClient w0("W0", &log), w1("W1", &log);
  std::shared_ptr<StagePool> s0 = MakePool(0, {&t0});
  std::shared_ptr<StagePool> s1 = MakePool(1, {&k0, &k1});
  std::shared_ptr<StagePool> s2 = MakePool(2, {&w0, &w1});
  ASSERT_THAT(s0->Pick("r9"), IsOkAndHolds(0));
  ASSERT_THAT(s1->Pick("other"), IsOkAndHolds(0));
  ASSERT_THAT(s1->Pick("r9"), IsOkAndHolds(1));
  ASSERT_THAT(s2->Pick("r9"), IsOkAndHolds(0));
  FakeProcessor proc(&log);
  proc.SetPartial("r9", "Hello wor");

  int calls = 0;
  absl::StatusOr<OrchOutput> out = absl::UnknownError("done never ran");
  AbortRequest({s0, s1, s2}, &proc, "r9", [&](absl::StatusOr<OrchOutput> result) {
    ++calls;
    out = std::move(result);
  });

  EXPECT_THAT(log, ElementsAre("collect_partial r9", "T0.abort [r9]", "K1.abort [r9]",
                               "W0.abort [r9]", "commit_abort r9"));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (OrchOutput{"r9", "Hello wor", true, "abort"}));
  EXPECT_FALSE(proc.Holds("r9"));
  EXPECT_EQ(s0->Bound("r9"), std::nullopt);
  EXPECT_EQ(s1->Bound("r9"), std::nullopt);
  EXPECT_EQ(s2->Bound("r9"), std::nullopt);
  // Other requests on the same replicas are untouched.
  EXPECT_THAT(s1->Bound("other"), Optional(0));
  EXPECT_THAT(k0.aborts(), IsEmpty());
}

// Example 3, failure variant: K0 fails, so nothing is committed; s0's binding is
// released, s1's is kept; the retry (K0 back) needs only K0 and still has the
// partial text to report.
TEST(StagePoolTest, WorkedTwoPhaseAbortFailureCommitsNothingAndRetries) {
  std::vector<std::string> log;
  FakeReplicaClient t0("T0", &log), k0("K0", &log);
  std::shared_ptr<StagePool> s0 = MakePool(0, {&t0});
  std::shared_ptr<StagePool> s1 = MakePool(1, {&k0});
  ASSERT_THAT(s0->Pick("r9"), IsOkAndHolds(0));
  ASSERT_THAT(s1->Pick("r9"), IsOkAndHolds(0));
  FakeProcessor proc(&log);
  proc.SetPartial("r9", "Hello wor");
  k0.FailAborts(absl::UnavailableError("K0 unreachable"));

  int calls = 0;
  absl::StatusOr<OrchOutput> out = absl::UnknownError("done never ran");
  auto record = [&](absl::StatusOr<OrchOutput> result) {
    ++calls;
    out = std::move(result);
  };
  AbortRequest({s0, s1}, &proc, "r9", record);

  EXPECT_THAT(log, ElementsAre("collect_partial r9", "T0.abort [r9]", "K0.abort [r9]"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("K0 unreachable"));
  EXPECT_TRUE(proc.Holds("r9"));
  EXPECT_EQ(s0->Bound("r9"), std::nullopt);
  EXPECT_THAT(s1->Bound("r9"), Optional(0));

  // s0 no longer binds r9, so the retry calls nothing there.
  log.clear();
  calls = 0;
  k0.FailAborts(absl::OkStatus());
  AbortRequest({s0, s1}, &proc, "r9", record);
  EXPECT_THAT(log, ElementsAre("collect_partial r9", "K0.abort [r9]", "commit_abort r9"));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (OrchOutput{"r9", "Hello wor", true, "abort"}));
  EXPECT_EQ(s1->Bound("r9"), std::nullopt);
}

// Example 3, dead replica: only the requests bound to it fail, once each.
TEST(StagePoolTest, WorkedDeadReplicaFailsOnlyItsRequests) {
  std::vector<std::string> log;
  FakeReplicaClient w0("W0", &log), w1("W1", &log);
  std::shared_ptr<StagePool> d = MakePool(2, {&w0, &w1});
  ASSERT_THAT(d->Pick("a"), IsOkAndHolds(0));
  ASSERT_THAT(d->Pick("b"), IsOkAndHolds(1));
  ASSERT_THAT(d->Pick("c"), IsOkAndHolds(0));

  EXPECT_THAT(HandleDeadReplica(*d, 0),
              ElementsAre(OrchOutput{"a", std::nullopt, true, "stage 2 replica 0 died"},
                          OrchOutput{"c", std::nullopt, true, "stage 2 replica 0 died"}));
  EXPECT_THAT(d->Bound("b"), Optional(1));
  EXPECT_EQ(d->Bound("a"), std::nullopt);
  EXPECT_EQ(d->Bound("c"), std::nullopt);
  EXPECT_THAT(d->LiveReplicas(), ElementsAre(1));
  // Evicting a replica calls nothing on it: its process is gone.
  EXPECT_THAT(log, IsEmpty());

  EXPECT_THAT(d->Evict(1), ElementsAre("b"));
  absl::StatusOr<int> none = d->Pick("new");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(d->bindings(), 0u) << "a failed Pick must not bind";
}

}  // namespace
}  // namespace stage_pool_test
}  // namespace omnistage
