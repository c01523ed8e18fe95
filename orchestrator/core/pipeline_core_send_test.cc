// Tests for PipelineCore's dealings with replicas that are gone, refuse, or stop a
// request on their own: a session found closed on send is evicted and another
// replica picked (the kill race), no live replica left names the stage and why, a
// command too large for a worker fails only its request, and a stop nobody here
// asked for ends the request at once (one an abort of ours asked for, even one
// whose answer never came, ends it ABORTED). Fakes only; every test ends with the
// invariant check.
#include <string>

#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kUnavailable = static_cast<int>(absl::StatusCode::kUnavailable);

// A worker's finished ABORT output for `id`: something stopped it there.
v1::StepOutputs StoppedByTheWorker(const std::string& id) {
  v1::StepOutputs step;
  v1::RequestOutput* output = step.add_outputs();
  output->set_request_id(id);
  output->set_finished(true);
  output->set_finish_reason(v1::FINISH_REASON_ABORT);
  output->mutable_error()->set_code(static_cast<int>(absl::StatusCode::kAborted));
  output->mutable_error()->set_message("stopped by an Abort call");
  return step;
}

// The kill race: a replica whose session closed a moment ago (its end not yet
// seen) is evicted when a send finds it closed, and a request that has not
// started on that stage goes to another live replica instead of failing.
TEST_F(PipelineCoreTest, SendToAJustClosedSessionEvictsItAndPicksAnother) {
  Build(Shape().Thinkers(2).Talkers(2).TalkerInput(InputMode::kOnFinish));
  auto victim = Gen("victim");  // T0
  auto other = Gen("other");    // T1
  fake(0, 0).FailCommands(absl::UnavailableError("session closed"));
  auto fresh = Gen("fresh");  // Round robin says T0: dead, so T1.
  EXPECT_EQ(fresh->fail_count(), 0) << fresh->fail_status();
  EXPECT_THAT(LogWith("fresh"), ElementsAre("T0.add fresh failed", "T1.add fresh"));
  EXPECT_FALSE(core().pool(0).alive(0));
  // The requests that lived on T0 failed, naming it, as if its stream had broken.
  ASSERT_EQ(victim->terminal_count(), 1);
  const v1::Error victim_error = victim->terminal().error();
  EXPECT_EQ(victim_error.code(), kUnavailable);
  EXPECT_EQ(victim_error.stage_id(), 0);
  EXPECT_EQ(victim_error.replica(), 0);
  EXPECT_EQ(victim_error.instance_id(), "T0#1");
  EXPECT_EQ(victim_error.message(), "stage 0 (thinker) replica 0 died: session closed");
  EXPECT_EQ(other->end_count(), 0);

  // At a later stage alike: K0's session closed, the hand-off goes to K1.
  fake(1, 0).FailCommands(absl::UnavailableError("session closed"));
  Done(0, 1, "other", {Text("x")});
  EXPECT_THAT(LogWith("K"), ElementsAre("K0.add other failed", "K1.add other"));
  EXPECT_EQ(other->end_count(), 0);
  Done(1, 1, "other", {Codes({1})});
  Done(2, 0, "other", {Audio("pcm")});
  EXPECT_EQ(other->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  Done(0, 1, "fresh");
  Done(1, 1, "fresh");
  Done(2, 0, "fresh");
}

// A worker event merged from several steps carries several outputs of one
// request: the core handles them as one (one client write, one hand-off).
TEST_F(PipelineCoreTest, SeveralOutputsOfARequestInOneEventAreHandledAsOne) {
  Build();
  auto sink = Gen("r1");
  auto other = Gen("r2");
  Out(0, 0, "r1", {Text("a")});  // Starts r1 on the talker.
  ClearLog();
  v1::StepOutputs step;
  for (const char* text : {"b", "c", "d"}) {
    for (const char* id : {"r1", "r2"}) {
      v1::RequestOutput& output = *step.add_outputs();
      output.set_request_id(id);
      *output.add_payloads() = Text(text);
    }
  }
  step.mutable_outputs(4)->set_finished(true);  // r1 ends with "d".
  step.mutable_outputs(4)->set_finish_reason(v1::FINISH_REASON_STOP);
  const int sends_before = sink->send_calls();
  core().OnStepOutputs(0, 0, step);
  EXPECT_EQ(sink->send_calls(), sends_before + 1);
  EXPECT_EQ(sink->Text("r1"), "abcd");
  EXPECT_EQ(other->Text("r2"), "bcd");
  // r1's three outputs reach the talker as one append, the last one; r2
  // starts there with all three.
  EXPECT_THAT(log_, ElementsAre("K0.append r1 last", "K0.add r2"));
  EXPECT_EQ(fake(1, 0).appends().back().chunks(0).text().text(), "bcd");
  Done(0, 0, "r2");
  for (const char* id : {"r1", "r2"}) {
    Done(1, 0, id);
    Done(2, 0, id);
  }
}

TEST_F(PipelineCoreTest, NoLiveReplicaLeftNamesTheStageAndWhy) {
  Build(Shape().TalkerInput(InputMode::kOnFinish));
  // Stage 0: the call itself fails; nothing is left bound.
  fake(0, 0).FailCommands(absl::UnavailableError("no session"));
  auto refused = Gen("r1");
  EXPECT_EQ(refused->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused->fail_status().message(),
            "stage 0 (thinker) has no live replica (replica 0: no session)");
  EXPECT_EQ(refused->terminal_count(), 0);
  EXPECT_EQ(core().in_flight(), 0u);
  EXPECT_EQ(core().pool(0).bindings(), 0u);

  // At a later stage the request has started: it ends with a terminal error.
  Ready(0, 0, "#2");
  fake(0, 0).FailCommands(absl::OkStatus());
  auto sink = Gen("r2");
  fake(1, 0).FailCommands(absl::UnavailableError("stream broken"));
  Done(0, 0, "r2", {Text("x")});
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Terminal terminal = sink->terminal();
  EXPECT_EQ(terminal.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(terminal.error().code(), kUnavailable);
  EXPECT_EQ(terminal.error().stage_id(), 1);
  EXPECT_EQ(terminal.error().replica(), -1);
  EXPECT_EQ(terminal.error().message(),
            "stage 1 (talker) has no live replica (replica 0: stream broken)");
}

// A command the worker cannot take (over its Ready.max_message_bytes) fails that
// request only: the replica and its other requests go on.
TEST_F(PipelineCoreTest, CommandTooLargeForTheWorkerFailsOnlyThatRequest) {
  Build(Shape().TalkerInput(InputMode::kOnFinish));
  auto neighbour = Gen("neighbour");
  Out(0, 0, "neighbour", {Text("a")});
  auto big = Gen("big");
  fake(1, 0).FailCommands(
      absl::ResourceExhaustedError("the command is 17000000 bytes; the worker accepts at most "
                                   "16777216"));
  Done(0, 0, "big", {Text("long text")});
  ASSERT_EQ(big->terminal_count(), 1);
  const v1::Error error = big->terminal().error();
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(error.stage_id(), 1);
  EXPECT_EQ(error.replica(), 0);
  EXPECT_EQ(error.instance_id(), "K0#1");
  EXPECT_THAT(error.message(), HasSubstr("stage 1 (talker) replica 0 could not take the request"));
  EXPECT_TRUE(core().pool(1).alive(0));
  fake(1, 0).FailCommands(absl::OkStatus());
  Done(0, 0, "neighbour");
  Done(1, 0, "neighbour");
  Done(2, 0, "neighbour");
  EXPECT_EQ(neighbour->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

// A stop nobody here asked for (another client's Abort on the worker, a worker-side
// limit): the worker ends the request on this session with a finished ABORT, and
// the client's stream ends at once with an error saying so, not at the idle timeout.
TEST_F(PipelineCoreTest, StopNobodyAskedForEndsTheRequestAtOnceSayingSo) {
  Build();
  auto sink = Gen("r1");
  auto other = Gen("r2", {v1::MODALITY_TEXT});
  Out(0, 0, "r1", {Text("partial")});
  ClearLog();
  v1::StepOutputs step = StoppedByTheWorker("r1");
  core().OnStepOutputs(1, 0, step);
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Error error = sink->terminal().error();
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(error.stage_id(), 1);
  EXPECT_EQ(error.replica(), 0);
  EXPECT_EQ(error.instance_id(), "K0#1");
  EXPECT_EQ(error.message(),
            "stage 1 (talker) replica 0 stopped the request: stopped by an Abort call");
  // Its other stages are stopped; the talker, which ended it, is not called.
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]"));
  EXPECT_EQ(other->end_count(), 0);
  Done(0, 0, "r2");
}

// This orchestrator's own abort: the worker's finished ABORT outputs arrive while
// the request is held, and change nothing.
TEST_F(PipelineCoreTest, ItsOwnAbortsFinishedOutputsChangeNothing) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("partial")});
  fake(1, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r1");
  absl::StatusOr<v1::AbortResponse> answer = absl::UnknownError("pending");
  core().Abort(request, absl::InfiniteFuture(),
               [&](absl::StatusOr<v1::AbortResponse> r) { answer = std::move(r); });
  for (int stage : {0, 1}) {
    v1::StepOutputs step;
    v1::RequestOutput* output = step.add_outputs();
    output->set_request_id("r1");
    output->set_finished(true);
    output->set_finish_reason(v1::FINISH_REASON_ABORT);
    core().OnStepOutputs(stage, 0, step);
  }
  EXPECT_EQ(sink->end_count(), 0);
  ASSERT_TRUE(fake(1, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(sink->terminal().partial_output(0).payload().text().text(), "partial");
}

// An abort whose worker call timed out (the worker was frozen) answers FAILED and
// the request goes on; when the worker resumes and applies the abort it had
// received, that stop is the abort's commit: one terminal ABORT with the partial
// output, not an error.
TEST_F(PipelineCoreTest, AbortThatTimedOutButWasAppliedLaterEndsAborted) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("partial")});
  Out(1, 0, "r1", {Codes({1})});
  fake(1, 0).set_hold_aborts(true);
  absl::StatusOr<v1::AbortResponse> answer = absl::UnknownError("pending");
  v1::AbortRequest request;
  request.add_request_ids("r1");
  core().Abort(request, absl::InfiniteFuture(),
               [&](absl::StatusOr<v1::AbortResponse> r) { answer = std::move(r); });
  ASSERT_TRUE(fake(1, 0).CompleteAbort(absl::DeadlineExceededError("deadline passed")));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->results(0).outcome(), v1::AbortResult::OUTCOME_FAILED);
  EXPECT_EQ(sink->end_count(), 0);
  ClearLog();
  // The worker wakes up and applies the abort it had received.
  v1::StepOutputs step = StoppedByTheWorker("r1");
  core().OnStepOutputs(1, 0, step);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "partial");
  // What still ran downstream is stopped; the talker, which stopped it, is not called.
  EXPECT_THAT(log_, ElementsAre("W0.abort [r1]"));
}

// The same, with the downstream stage slow to confirm: the request ends ABORT
// only once every stage that ran it confirmed the stop (found by the core
// fuzzer: it used to end at the talker's report, with the vocoder still
// running it).
TEST_F(PipelineCoreTest, AStopReportedAfterAFailedAbortCommitsOnlyOnceEveryStageConfirms) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("partial")});
  Out(1, 0, "r1", {Codes({1})});
  fake(1, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r1");
  core().Abort(request, absl::InfiniteFuture(), [](absl::StatusOr<v1::AbortResponse>) {});
  ASSERT_TRUE(fake(1, 0).CompleteAbort(absl::DeadlineExceededError("deadline passed")));
  fake(2, 0).set_hold_aborts(true);
  v1::StepOutputs step = StoppedByTheWorker("r1");
  core().OnStepOutputs(1, 0, step);
  // The vocoder is asked to stop it; until it confirms, no terminal.
  ASSERT_EQ(fake(2, 0).held_aborts(), 1u);
  EXPECT_EQ(sink->end_count(), 0);
  EXPECT_TRUE(core().pool(2).Bound("r1").has_value());
  ASSERT_TRUE(fake(2, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "partial");
}

// A hung engine must not poison its replica: when the worker reports a stalled
// step, the requests it held fail at once naming the stall, nothing more is sent
// there, and once the step returns the same instance serves again.
TEST_F(PipelineCoreTest, StalledReplicaFailsItsRequestsAndIsSkippedUntilItRecovers) {
  Build(Shape().Thinkers(2));
  auto held = Gen("held");                         // T0
  auto other = Gen("other", {v1::MODALITY_TEXT});  // T1
  v1::Stalled stalled;
  stalled.set_step(42);
  stalled.set_running_ms(5200);
  stalled.set_stall_timeout_ms(5000);
  core().OnReplicaStalled(0, 0, stalled);
  ASSERT_EQ(held->terminal_count(), 1);
  const v1::Error error = held->terminal().error();
  EXPECT_EQ(error.code(), kUnavailable);
  EXPECT_EQ(error.replica(), 0);
  EXPECT_EQ(error.instance_id(), "T0#1");
  EXPECT_EQ(error.message(),
            "stage 0 (thinker) replica 0 stalled: step 42 has run for 5.2s (stall timeout 5s)");
  EXPECT_EQ(other->end_count(), 0);
  EXPECT_FALSE(core().pool(0).alive(0));
  EXPECT_EQ(core().Status().stages(0).replicas(0).last_error(),
            "stalled: step 42 has run for 5.2s (stall timeout 5s)");
  // New requests go to the replica that works.
  ClearLog();
  auto next = Gen("next", {v1::MODALITY_TEXT});
  auto after = Gen("after", {v1::MODALITY_TEXT});
  EXPECT_THAT(LogWith(".add"), ElementsAre("T1.add next", "T1.add after"));
  // The step returned: the same instance is ready again, with no bindings.
  Ready(0, 0, "#1");
  EXPECT_TRUE(core().pool(0).alive(0));
  EXPECT_EQ(core().pool(0).BoundCount(0), 0);
  Done(0, 1, "other");
  Done(0, 1, "next");
  Done(0, 1, "after");
}

// A worker that drains (SIGTERM): nothing new goes there, what it has goes on to
// its end; when its session then ends, nothing is left to fail.
TEST_F(PipelineCoreTest, DrainingReplicaTakesNothingNewAndFinishesWhatItHas) {
  Build(Shape().Thinkers(2));
  auto kept = Gen("kept", {v1::MODALITY_TEXT});  // T0
  core().OnReplicaDraining(0, 0, v1::Draining());
  EXPECT_EQ(core().Status().stages(0).replicas(0).state(), v1::ReplicaStatus::STATE_DRAINING);
  EXPECT_TRUE(core().Status().stages(0).replicas(0).alive());
  ClearLog();
  auto a = Gen("a", {v1::MODALITY_TEXT});
  auto b = Gen("b", {v1::MODALITY_TEXT});
  EXPECT_THAT(LogWith(".add"), ElementsAre("T1.add a", "T1.add b"));
  Out(0, 0, "kept", {Text("still here")});
  Done(0, 0, "kept");
  EXPECT_EQ(kept->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(kept->Text("kept"), "still here");
  // The worker exits; its session ends with nothing bound to it.
  core().OnReplicaDown(0, 0, absl::UnavailableError("stage worker is shutting down"));
  EXPECT_EQ(core().Status().stages(0).replicas(0).state(), v1::ReplicaStatus::STATE_DEAD);
  // Its successor (a new instance on the same address) is live again.
  Ready(0, 0, "#2");
  EXPECT_EQ(core().Status().stages(0).replicas(0).state(), v1::ReplicaStatus::STATE_LIVE);
  Done(0, 1, "a");
  Done(0, 1, "b");
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
