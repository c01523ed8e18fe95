// Tests for PipelineCore's failure paths: the client-facing two-phase Abort (one
// worker call per replica, partial output, failure and retry), client Cancel,
// failed submits, dead and restarted replicas, worker rejections and worker
// errors. Every test ends with the invariant check: exactly one terminal per
// admitted request, nothing in flight, no binding left. Fakes only.
#include <map>
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
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using ::testing::UnorderedElementsAre;

constexpr int kUnavailable = static_cast<int>(absl::StatusCode::kUnavailable);

TEST_F(PipelineCoreTest, AbortBeforeTheTalkerStartedCallsOnlyTheThinker) {
  Build(Shape().TalkerInput(InputMode::kOnFinish));
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hal")});
  Out(0, 0, "r1", {Text("f")});
  absl::StatusOr<v1::AbortResponse> result = AbortNow({"r1"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_THAT(LogWith(".abort"), ElementsAre("T0.abort [r1]"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "Half");
  Out(0, 0, "r1", {Text("late")}, true);  // The worker's last step: dropped.
  EXPECT_THAT(LogWith("K0"), IsEmpty());
}

TEST_F(PipelineCoreTest, AbortOfManyIdsMakesOneCallPerReplica) {
  Build(Shape().Thinkers(2).Talkers(2));
  std::map<std::string, std::shared_ptr<FakeResponseSink>> sink;
  // Thinkers: a, c, e -> T0; b, d -> T1. Talkers: a, c -> K0; b, d -> K1.
  for (const char* id : {"a", "b", "c", "d", "e"}) sink[id] = Gen(id);
  Out(0, 0, "a", {Text("A1")});
  Out(0, 1, "b", {Text("B1")});
  Out(0, 0, "c", {Text("C1")});
  Out(1, 0, "a", {Codes({1})});  // a, b -> W0
  Out(1, 1, "b", {Codes({1})});
  Out(0, 1, "d", {Text("D1")}, true);  // K1; d is done on the thinker
  Out(0, 0, "a", {Text("A2")});
  ClearLog();

  absl::StatusOr<v1::AbortResponse> result = AbortNow({"ghost1", "d", "a", "b", "ghost2", "c"});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::string> outcomes;
  for (const v1::AbortResult& r : result->results()) {
    outcomes.push_back(absl::StrCat(r.request_id(), ":", r.outcome()));
  }
  EXPECT_THAT(outcomes, ElementsAre("ghost1:2", "d:1", "a:1", "b:1", "ghost2:2", "c:1"));
  EXPECT_THAT(log_, ElementsAre("T0.abort [a,c]", "T1.abort [b]", "K0.abort [a,c]",
                                "K1.abort [d,b]", "W0.abort [a,b]"));
  for (const char* id : {"a", "b", "c", "d"}) {
    ASSERT_EQ(sink[id]->terminal_count(), 1) << id;
    EXPECT_EQ(sink[id]->terminal().finish_reason(), v1::FINISH_REASON_ABORT) << id;
  }
  EXPECT_EQ(PartialText(sink["a"]->terminal()), "A1A2");
  EXPECT_EQ(PartialText(sink["d"]->terminal()), "D1");
  EXPECT_EQ(sink["e"]->end_count(), 0) << "e was not aborted";
  EXPECT_THAT(core().pool(0).Bound("e"), Optional(0));
  Out(1, 0, "a", {Codes({9})});  // Stale: dropped.
  EXPECT_TRUE(AbortNow({"e"}).ok());
}

// Worked example 3 (docs/architecture.md), second half: the talker's abort fails. Nothing is
// committed, the failed stage stays bound, outputs that arrived meanwhile are not lost, and a retry
// succeeds.
TEST_F(PipelineCoreTest, FailedAbortCommitsNothingAndCanBeRetried) {
  Build();
  auto sink = Gen("r9");
  Out(0, 0, "r9", {Text("Hello wor")});
  Out(1, 0, "r9", {Codes({1})});
  ClearLog();
  fake(1, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r9");
  absl::StatusOr<v1::AbortResponse> first = absl::UnknownError("pending");
  int answers = 0;
  core().Abort(request, absl::InfiniteFuture(), [&](absl::StatusOr<v1::AbortResponse> r) {
    ++answers;
    first = std::move(r);
  });
  EXPECT_THAT(log_, ElementsAre("T0.abort [r9]", "K0.abort [r9]"));
  EXPECT_EQ(answers, 0);
  EXPECT_EQ(sink->end_count(), 0) << "committed before every stage confirmed";
  EXPECT_EQ(core().in_flight(), 1u);
  Out(1, 0, "r9", {Codes({2})});          // arrives while the abort is in flight
  Out(2, 0, "r9", {Audio("pcm-early")});  // likewise
  EXPECT_EQ(sink->send_calls(), 1) << "outputs leaked out of a frozen request";

  ASSERT_TRUE(fake(1, 0).CompleteAbort(absl::UnavailableError("worker busy")));
  ASSERT_EQ(answers, 1);
  // The call answers; the id's outcome says it failed, where, and why.
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->results_size(), 1);
  const v1::AbortResult& failed = first->results(0);
  EXPECT_EQ(failed.outcome(), v1::AbortResult::OUTCOME_FAILED);
  EXPECT_EQ(failed.error().code(), kUnavailable);
  EXPECT_EQ(failed.error().stage_id(), 1);
  EXPECT_EQ(failed.error().replica(), 0);
  EXPECT_EQ(failed.error().instance_id(), "K0#1");
  EXPECT_EQ(failed.error().message(), "stage 1 (talker) replica 0 abort failed: worker busy");
  EXPECT_EQ(sink->end_count(), 0);
  EXPECT_EQ(core().pool(0).Bound("r9"), std::nullopt) << "the thinker's abort succeeded";
  EXPECT_THAT(core().pool(1).Bound("r9"), Optional(0));
  EXPECT_THAT(core().pool(2).Bound("r9"), Optional(0));
  // The outputs held back during the abort were replayed.
  EXPECT_THAT(LogWith("W0"), ElementsAre("W0.append r9"));
  ASSERT_EQ(sink->chunks("r9").size(), 2u);
  EXPECT_EQ(sink->chunks("r9")[1].payload().audio().pcm_s16le(), "pcm-early");

  // Retry: the thinker is not called again; the commit waits for the last stage.
  ClearLog();
  fake(2, 0).set_hold_aborts(true);
  fake(1, 0).set_hold_aborts(false);
  answers = 0;
  core().Abort(request, absl::InfiniteFuture(), [&](absl::StatusOr<v1::AbortResponse> r) {
    ++answers;
    first = std::move(r);
  });
  EXPECT_THAT(log_, ElementsAre("K0.abort [r9]", "W0.abort [r9]"));
  EXPECT_EQ(sink->end_count(), 0);
  ASSERT_TRUE(fake(2, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_EQ(answers, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "Hello wor");
}

// A client retries an Abort while the first is still in flight; the first then
// fails and the retry succeeds: the request must still end, once.
TEST_F(PipelineCoreTest, OverlappingAbortsOfOneRequestEndItOnce) {
  Build();
  auto sink = Gen("r");
  Out(0, 0, "r", {Text("x")});
  fake(0, 0).set_hold_aborts(true);
  v1::AbortRequest request;
  request.add_request_ids("r");
  std::vector<absl::StatusOr<v1::AbortResponse>> answers;
  auto record = [&](absl::StatusOr<v1::AbortResponse> r) { answers.push_back(std::move(r)); };
  core().Abort(request, absl::InfiniteFuture(), record);
  core().Abort(request, absl::InfiniteFuture(), record);
  ASSERT_EQ(fake(0, 0).held_aborts(), 2u);
  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::UnavailableError("busy")));
  Out(1, 0, "r", {Codes({1})});  // The retry still runs: the request stays frozen.
  EXPECT_THAT(LogWith("W0"), IsEmpty());
  ASSERT_TRUE(fake(0, 0).CompleteAbort(absl::OkStatus()));
  ASSERT_EQ(answers.size(), 2u);
  ASSERT_TRUE(answers[0].ok()) << answers[0].status();
  EXPECT_EQ(answers[0]->results(0).outcome(), v1::AbortResult::OUTCOME_FAILED);
  ASSERT_TRUE(answers[1].ok()) << answers[1].status();
  EXPECT_EQ(answers[1]->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "x");
}

// The last talker dies: only requests bound to it fail; their other stages are
// aborted; a request still on the thinker survives and uses the new incarnation.
TEST_F(PipelineCoreTest, DeadReplicaFailsOnlyItsRequests) {
  Build();
  auto hit = Gen("hit");        // T0, K0, W0
  auto spared = Gen("spared");  // T0 only
  Out(0, 0, "hit", {Text("x")});
  Out(1, 0, "hit", {Codes({1})});
  ClearLog();
  core().OnReplicaDown(1, 0, absl::UnavailableError("connection reset"));
  ASSERT_EQ(hit->terminal_count(), 1);
  const v1::Terminal t = hit->terminal();
  EXPECT_EQ(t.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(t.error().code(), kUnavailable);
  EXPECT_EQ(t.error().message(), "stage 1 (talker) replica 0 died: connection reset");
  EXPECT_EQ(t.error().stage_id(), 1);
  EXPECT_EQ(t.error().replica(), 0);
  EXPECT_EQ(t.error().instance_id(), "K0#1");
  EXPECT_THAT(log_, UnorderedElementsAre("T0.abort [hit]", "W0.abort [hit]"));
  EXPECT_EQ(spared->end_count(), 0);
  core().OnReplicaDown(1, 0, absl::UnavailableError("again"));  // Already dead: no-op.
  Out(1, 0, "hit", {Codes({2})});                               // Stale.
  EXPECT_EQ(hit->end_count(), 1);

  Ready(1, 0, "#2");
  Out(0, 0, "spared", {Text("y")});
  EXPECT_THAT(LogWith("K0"), ElementsAre("K0.add spared"));
  Done(0, 0, "spared");
  Out(1, 0, "spared", {Codes({3})}, true);
  Done(2, 0, "spared", {Audio("pcm")});
  EXPECT_EQ(spared->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

// Worked example 3, dead replica: d = StagePool(2, [W0, W1]); a, b, c -> 0, 1, 0.
TEST_F(PipelineCoreTest, DeadVocoderReplicaSparesTheOtherOne) {
  Build(Shape().Vocoders(2));
  std::map<std::string, std::shared_ptr<FakeResponseSink>> sink;
  for (const char* id : {"a", "b", "c"}) {
    sink[id] = Gen(id);
    Out(0, 0, id, {Text("t")});
    Out(1, 0, id, {Codes({1})});
  }
  EXPECT_THAT(LogWith("W"), ElementsAre("W0.add a", "W1.add b", "W0.add c"));
  ClearLog();
  core().OnReplicaDown(2, 0, absl::InternalError("fatal: engine crashed"));
  // Their upstream work is aborted with one call per replica for both.
  EXPECT_THAT(log_, ElementsAre("T0.abort [a,c]", "K0.abort [a,c]"));
  for (const char* id : {"a", "c"}) {
    ASSERT_EQ(sink[id]->terminal_count(), 1) << id;
    EXPECT_EQ(sink[id]->terminal().error().message(),
              "stage 2 (vocoder) replica 0 died: fatal: engine crashed");
  }
  EXPECT_THAT(core().pool(2).Bound("b"), Optional(1));
  EXPECT_THAT(core().pool(2).LiveReplicas(), ElementsAre(1));
  Done(0, 0, "b");
  Out(1, 0, "b", {}, true);
  Done(2, 1, "b", {Audio("pcm")});
  EXPECT_EQ(sink["b"]->terminal().finish_reason(), v1::FINISH_REASON_STOP);

  // No vocoder left: a request reaching it fails naming the stage; its thinker
  // and talker work is aborted.
  core().OnReplicaDown(2, 1, absl::UnavailableError("gone"));
  auto late = Gen("late");
  Out(0, 0, "late", {Text("t")});
  ClearLog();
  Out(1, 0, "late", {Codes({1})});
  ASSERT_EQ(late->terminal_count(), 1);
  EXPECT_EQ(late->terminal().error().code(), kUnavailable);
  EXPECT_EQ(late->terminal().error().message(), "stage 2 (vocoder) has no live replica");
  EXPECT_THAT(log_, ElementsAre("T0.abort [late]", "K0.abort [late]"));
}

TEST_F(PipelineCoreTest, GenerateWithoutALiveFirstStageIsUnavailable) {
  Build();
  core().OnReplicaDown(0, 0, absl::UnavailableError("down"));
  auto sink = Gen("r1");
  EXPECT_EQ(sink->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(sink->fail_status().message(), "stage 0 (thinker) has no live replica");
  EXPECT_THAT(log_, IsEmpty());
  Ready(0, 0, "#2");
  auto ok = Gen("r2", {v1::MODALITY_TEXT});
  Done(0, 0, "r2");
  EXPECT_EQ(ok->terminal_count(), 1);
}

// A replica that stays unreachable says why once per distinct reason, not on
// every reconnect attempt.
TEST_F(PipelineCoreTest, AnUnreachableReplicaLogsEachNewReasonOnce) {
  Build();
  ::testing::internal::CaptureStderr();
  core().OnReplicaDown(0, 0, absl::UnavailableError("stream broke"));
  core().OnReplicaDown(0, 0, absl::UnavailableError("connection refused"));
  core().OnReplicaDown(0, 0, absl::UnavailableError("connection refused"));
  core().OnReplicaDown(0, 0, absl::UnavailableError("handshake failed"));
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(logged, HasSubstr("down: stream broke; failing its 0 request(s)"));
  int unreachable_lines = 0;
  for (size_t at = logged.find("not reachable"); at != std::string::npos;
       at = logged.find("not reachable", at + 1)) {
    ++unreachable_lines;
  }
  EXPECT_EQ(unreachable_lines, 2) << logged;
  EXPECT_THAT(logged, HasSubstr(": connection refused; retrying"));
  EXPECT_THAT(logged, HasSubstr(": handshake failed; retrying"));
  EXPECT_EQ(core().Status().stages(0).replicas(0).last_error(), "handshake failed");
}

TEST_F(PipelineCoreTest, ReadyWithANewInstanceWhileAliveIsARestart) {
  Build();
  auto sink = Gen("r1", {v1::MODALITY_TEXT});
  Ready(0, 0, "#1");  // The same incarnation again: nothing happens.
  EXPECT_EQ(sink->end_count(), 0);
  Ready(0, 0, "#2");
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(sink->terminal().error().message(),
              HasSubstr("stage 0 (thinker) replica 0 died: restarted as T0#2"));
  EXPECT_EQ(core().Status().stages(0).replicas(0).instance_id(), "T0#2");
  EXPECT_TRUE(core().pool(0).alive(0));
  auto next = Gen("r2", {v1::MODALITY_TEXT});
  Done(0, 0, "r2");
  EXPECT_EQ(next->terminal_count(), 1);
}

TEST_F(PipelineCoreTest, WorkerRejectionFailsTheRequestWithTheWorkersError) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("x")});
  ClearLog();
  v1::CommandRejected rejected;
  rejected.set_request_id("r1");
  rejected.set_command(v1::CommandRejected::KIND_ADD);
  rejected.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  rejected.mutable_error()->set_message("params.max_tokens: 0 is below 1");
  core().OnCommandRejected(2, 0, rejected);  // r1 is not on the vocoder...
  v1::CommandRejected unknown = rejected;
  unknown.set_request_id("nobody");
  core().OnCommandRejected(1, 0, unknown);  // ...nor is an unknown id anything.
  EXPECT_EQ(sink->end_count(), 0);
  core().OnCommandRejected(1, 0, rejected);
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Terminal terminal = sink->terminal();
  const v1::Error& error = terminal.error();
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(error.message(),
            "stage 1 (talker) replica 0 rejected the request: params.max_tokens: 0 is below 1");
  EXPECT_EQ(error.stage_id(), 1);
  // The talker never started it: only the thinker is aborted.
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]"));
}

TEST_F(PipelineCoreTest, RejectedAppendKeepsTheBindingAndAbortsTheRequestThere) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("x")});  // Streaming: the talker got an Add.
  ClearLog();
  v1::CommandRejected rejected;
  rejected.set_request_id("r1");
  rejected.set_command(v1::CommandRejected::KIND_APPEND_INPUT);
  rejected.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
  rejected.mutable_error()->set_message("append_input: bad chunk");
  core().OnCommandRejected(1, 0, rejected);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().error().stage_id(), 1);
  // The talker still holds r1 after a rejected append: it is stopped there too.
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]", "K0.abort [r1]"));
}

TEST_F(PipelineCoreTest, WorkerErrorOutputFailsTheRequestAndAbortsOtherStages) {
  Build();
  auto sink = Gen("r1");
  auto other = Gen("r2", {v1::MODALITY_TEXT});
  Out(0, 0, "r1", {Text("x")});
  Out(1, 0, "r1", {Codes({1})});
  ClearLog();
  v1::StepOutputs step;
  v1::RequestOutput* output = step.add_outputs();
  output->set_request_id("r1");
  output->set_finished(true);
  output->set_finish_reason(v1::FINISH_REASON_ERROR);
  output->mutable_error()->set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
  output->mutable_error()->set_message("out of memory");
  core().OnStepOutputs(2, 0, step);
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Terminal t = sink->terminal();
  EXPECT_EQ(t.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(t.error().code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(t.error().message(), "stage 2 (vocoder) replica 0 failed: out of memory");
  EXPECT_EQ(t.error().replica(), 0);
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]", "K0.abort [r1]"));
  EXPECT_EQ(other->end_count(), 0);

  // An error without a code still fails, as INTERNAL.
  output->set_request_id("r2");
  output->mutable_error()->set_code(0);
  core().OnStepOutputs(0, 0, step);
  EXPECT_EQ(other->terminal().error().code(), static_cast<int>(absl::StatusCode::kInternal));
}

TEST_F(PipelineCoreTest, CancelAbortsEveryStageOnlyForItsOwnSink) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("par")});
  Out(1, 0, "r1", {Codes({1})});
  ClearLog();
  FakeResponseSink stranger;
  core().Cancel("r1", &stranger);
  core().Cancel("unknown", sink.get());
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(core().in_flight(), 1u);
  core().Cancel("r1", sink.get());
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]", "K0.abort [r1]", "W0.abort [r1]"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_EQ(PartialText(sink->terminal()), "par");
}

TEST_F(PipelineCoreTest, CancelWhoseAbortKeepsFailingEndsWithOneError) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("x")});
  fake(1, 0).FailAborts(absl::UnavailableError("stuck"));
  core().Cancel("r1", sink.get());
  // Five attempts, 50, 100, 200 and 400 ms apart; only then the error terminal.
  scheduler_.AdvanceBy(absl::Milliseconds(749));
  EXPECT_EQ(sink->end_count(), 0);
  EXPECT_EQ(LogWith("K0.abort").size(), 4u);
  scheduler_.AdvanceBy(absl::Milliseconds(1));
  // The fifth attempt failed, and the ended request's cleanup made its first.
  EXPECT_EQ(LogWith("K0.abort").size(), 5u + 1u);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("could not abort a cancelled request"));
  EXPECT_THAT(sink->terminal().error().message(), Not(HasSubstr("stage 0")));
  // The leftover talker binding is retried a few times, then given up.
  scheduler_.AdvanceBy(absl::Seconds(10));
  EXPECT_EQ(LogWith("K0.abort").size(), 5u + 4u);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
