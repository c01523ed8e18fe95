// Tests for PipelineCore's timers on a manual clock (no sleeping): the idle
// timeout, the drain deadline, the worker abort deadline, and the retries with
// backoff of cancellations and leftover cleanups.
#include <memory>
#include <string>
#include <vector>

#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

constexpr absl::Duration kIdle = absl::Seconds(30);  // OmniConfig's (the default).

TEST_F(PipelineCoreTest, IdleTimeoutFailsARequestThatProducesNothing) {
  Build();
  auto sink = Gen("r1");
  scheduler_.AdvanceBy(kIdle - absl::Milliseconds(1));
  EXPECT_EQ(sink->end_count(), 0);
  Out(0, 0, "r1", {Text("x")});  // Activity restarts the clock.
  scheduler_.AdvanceBy(kIdle - absl::Milliseconds(1));
  EXPECT_EQ(sink->end_count(), 0);
  scheduler_.AdvanceBy(absl::Milliseconds(1));
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Error error = sink->terminal().error();
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  // The first stage still working on it is blamed: the thinker.
  EXPECT_EQ(error.stage_id(), 0);
  EXPECT_EQ(error.replica(), 0);
  EXPECT_EQ(error.message(),
            "stage 0 (thinker) replica 0 produced nothing for 30s (request_idle_timeout)");
  // Its stages are stopped.
  EXPECT_THAT(LogWith(".abort"), ElementsAre("T0.abort [r1]", "K0.abort [r1]"));
}

TEST_F(PipelineCoreTest, IdleTimerWaitsWhileAnAbortHoldsTheRequest) {
  Build();
  auto sink = Gen("r1");
  fake(0, 0).set_hold_aborts(true);
  absl::StatusOr<v1::AbortResponse> answer = absl::UnknownError("pending");
  v1::AbortRequest request;
  request.add_request_ids("r1");
  core().Abort(request, absl::InfiniteFuture(),
               [&](absl::StatusOr<v1::AbortResponse> r) { answer = std::move(r); });
  scheduler_.AdvanceBy(kIdle + absl::Seconds(1));
  EXPECT_EQ(sink->end_count(), 0) << "the idle timer fired on a frozen request";
  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
}

TEST_F(PipelineCoreTest, DrainDeadlineAbortsWhatIsStillInFlight) {
  Build();
  auto quick = Gen("quick", {v1::MODALITY_TEXT});
  auto slow = Gen("slow", {v1::MODALITY_TEXT});
  int drained = 0;
  core().Drain(scheduler_.Now() + absl::Seconds(10), [&] { ++drained; });
  Done(0, 0, "quick", {Text("done")});
  EXPECT_EQ(quick->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  scheduler_.AdvanceBy(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_EQ(drained, 0);
  EXPECT_EQ(slow->end_count(), 0);
  scheduler_.AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(slow->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(drained, 1);
}

TEST_F(PipelineCoreTest, DrainDeadlineEndsWithAnErrorWhatCannotBeAborted) {
  Build();
  auto stuck = Gen("stuck");
  fake(0, 0).FailAborts(absl::UnavailableError("worker hung"));
  int drained = 0;
  core().Drain(scheduler_.Now() + absl::Seconds(1), [&] { ++drained; });
  scheduler_.AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(stuck->terminal_count(), 1);
  EXPECT_EQ(stuck->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(stuck->terminal().error().message(),
              HasSubstr("the orchestrator is shutting down; abort failed: stage 0 (thinker) "
                        "replica 0 abort failed: worker hung"));
  EXPECT_EQ(drained, 1);
  // Its bindings are retried, then given up, as for any ended request.
  scheduler_.AdvanceBy(absl::Seconds(10));
}

// Worker aborts end by the client's deadline when it is sooner than
// worker_abort_timeout, so an Abort the client gave up on never commits later.
TEST_F(PipelineCoreTest, WorkerAbortDeadlineIsTheSoonerOfTheClientsAndTheTimeout) {
  PipelineConfig config = OmniConfig(Shape());
  config.worker_abort_timeout = absl::Seconds(2);
  Build(config);
  auto a = Gen("a");
  auto b = Gen("b");
  const absl::Time now = scheduler_.Now();
  v1::AbortRequest request;
  request.add_request_ids("a");
  core().Abort(request, now + absl::Milliseconds(300), [](absl::StatusOr<v1::AbortResponse>) {});
  request.set_request_ids(0, "b");
  core().Abort(request, absl::InfiniteFuture(), [](absl::StatusOr<v1::AbortResponse>) {});
  EXPECT_THAT(fake(0, 0).abort_deadlines(),
              ElementsAre(now + absl::Milliseconds(300), now + absl::Seconds(2)));
}

// Black-box finding 4: the client's Abort deadline passes while a worker abort is
// pending. The worker call fails at that same deadline, nothing is committed, and
// the client's retry finds the request still in flight and aborts it.
TEST_F(PipelineCoreTest, AbortThatMissesTheClientsDeadlineCommitsNothingAndRetryWorks) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("partial")});
  fake(1, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r1");
  absl::StatusOr<v1::AbortResponse> first = absl::UnknownError("pending");
  core().Abort(request, scheduler_.Now() + absl::Milliseconds(500),
               [&](absl::StatusOr<v1::AbortResponse> r) { first = std::move(r); });
  scheduler_.AdvanceBy(absl::Milliseconds(500));
  ASSERT_TRUE(fake(1, 0).CompleteAbort(absl::DeadlineExceededError("Deadline Exceeded")));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->results(0).outcome(), v1::AbortResult::OUTCOME_FAILED);
  EXPECT_EQ(sink->end_count(), 0) << "committed after the client gave up";
  EXPECT_THAT(core().pool(1).Bound("r1"), Optional(0));

  fake(1, 0).set_hold_aborts(false);
  EXPECT_EQ(AbortNow({"r1"})->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
}

// A request that ended while an upstream stage still runs it: that stage is
// stopped, retried 100, 200 and 400 ms apart while it fails, then given up.
TEST_F(PipelineCoreTest, LeftoverCleanupRetriesWithBackoffThenGivesUp) {
  Build();
  auto sink = Gen("r1", {v1::MODALITY_AUDIO});
  Out(0, 0, "r1", {Text("a")});
  Out(1, 0, "r1", {Codes({1})});
  fake(0, 0).FailAborts(absl::UnavailableError("busy"));
  // The vocoder ends first (max_tokens): thinker and talker still hold r1.
  Out(2, 0, "r1", {Audio("pcm")}, /*finished=*/true, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(LogWith("T0.abort").size(), 1u);
  EXPECT_EQ(core().pool(1).bindings(), 0u) << "the talker confirmed at once";
  scheduler_.AdvanceBy(absl::Milliseconds(99));
  EXPECT_EQ(LogWith("T0.abort").size(), 1u);
  scheduler_.AdvanceBy(absl::Milliseconds(1));
  EXPECT_EQ(LogWith("T0.abort").size(), 2u);
  scheduler_.AdvanceBy(absl::Milliseconds(200));
  EXPECT_EQ(LogWith("T0.abort").size(), 3u);
  EXPECT_THAT(core().pool(0).Bound("r1"), Optional(0));
  scheduler_.AdvanceBy(absl::Milliseconds(400));
  EXPECT_EQ(LogWith("T0.abort").size(), 4u);
  EXPECT_EQ(core().pool(0).Bound("r1"), std::nullopt) << "given up after four attempts";
  scheduler_.AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(LogWith("T0.abort").size(), 4u);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
