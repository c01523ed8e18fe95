// Tests for PipelineCore's request lifecycle on the happy and admission paths:
// the StagePool's state tables (docs/architecture.md) driven through the core, routing stage to
// stage (on_finish and streaming hand-off), final outputs and modality selection, parameter
// merging, round robin and stickiness, Status, CallStageUtility and Drain. Failure paths (abort,
// cancel, dead replicas, rejections) are in pipeline_core_failure_test.cc, validation and admission
// in pipeline_core_admission_test.cc. Fakes only: no sockets, no sleeps, no event loop.
#include "orchestrator/core/pipeline_core.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/modality.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

PipelineConfig ThinkerOnly(int replicas) {
  PipelineConfig config;
  config.stages.push_back(
      Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, replicas));
  return config;
}

std::vector<std::string> Outcomes(const v1::AbortResponse& response) {
  std::vector<std::string> out;
  for (const v1::AbortResult& r : response.results()) {
    out.push_back(
        absl::StrCat(r.request_id(), "=",
                     r.outcome() == v1::AbortResult::OUTCOME_ABORTED ? "aborted" : "not_found"));
  }
  return out;
}

// Worked examples 1 and 2 (docs/architecture.md) through the core: one stage, replicas A, B, C
// (T0..T2).
TEST_F(PipelineCoreTest, WorkedRoundRobinEvictAndGroupedAbort) {
  Build(ThinkerOnly(3));
  std::map<std::string, std::shared_ptr<FakeResponseSink>> sink;
  for (const char* id : {"x", "y", "z", "w"}) sink[id] = Gen(id);
  EXPECT_THAT(LogWith(".add"), ElementsAre("T0.add x", "T1.add y", "T2.add z", "T0.add w"));
  EXPECT_THAT(core().pool(0).Bound("x"), Optional(0));
  EXPECT_EQ(core().pool(0).Bound("q"), std::nullopt);

  // evict 1: only y fails, with one terminal naming the stage and the replica.
  core().OnReplicaDown(0, 1, absl::UnavailableError("worker exited"));
  ASSERT_EQ(sink["y"]->terminal_count(), 1);
  const v1::Terminal dead = sink["y"]->terminal();
  EXPECT_EQ(dead.finish_reason(), v1::FINISH_REASON_ERROR);
  EXPECT_EQ(dead.error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(dead.error().message(), "stage 0 (thinker) replica 1 died: worker exited");
  EXPECT_EQ(dead.error().stage_id(), 0);
  EXPECT_EQ(dead.error().replica(), 1);
  EXPECT_EQ(dead.error().instance_id(), "T1#1");
  for (const char* id : {"x", "z", "w"}) EXPECT_EQ(sink[id]->end_count(), 0) << id;
  EXPECT_EQ(core().pool(0).bindings(), 3u);

  // pick y / v over live = [0, 2] with rr = 4: y -> 0, v -> 2.
  sink["y2"] = Gen("y");
  sink["v"] = Gen("v");
  EXPECT_THAT(LogWith(".add"),
              ElementsAre("T0.add x", "T1.add y", "T2.add z", "T0.add w", "T0.add y", "T2.add v"));

  // abort([x, z, w, ghost, v]): A.abort([x, w]), C.abort([z, v]), ghost ignored.
  absl::StatusOr<v1::AbortResponse> aborted = AbortNow({"x", "z", "w", "ghost", "v"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_THAT(Outcomes(*aborted),
              ElementsAre("x=aborted", "z=aborted", "w=aborted", "ghost=not_found", "v=aborted"));
  EXPECT_THAT(LogWith(".abort"), ElementsAre("T0.abort [x,w]", "T2.abort [z,v]"));
  for (const char* id : {"x", "z", "w", "v"}) {
    ASSERT_EQ(sink[id]->terminal_count(), 1) << id;
    EXPECT_EQ(sink[id]->terminal().finish_reason(), v1::FINISH_REASON_ABORT) << id;
  }
  EXPECT_EQ(core().pool(0).bindings(), 1u);  // {y: 0}
  EXPECT_THAT(core().pool(0).Bound("y"), Optional(0));

  Done(0, 0, "y", {Text("ok")});
  EXPECT_EQ(sink["y2"]->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

// Worked example 3: r9 bound on T0, K1 and W0 with partial text "Hello wor".
TEST_F(PipelineCoreTest, WorkedTwoPhaseAbortCallsEveryStageInOrder) {
  Build(Shape().Talkers(2));
  auto other = Gen("other");
  auto r9 = Gen("r9");
  Out(0, 0, "other", {Text("x")});    // talker: other -> K0
  Out(0, 0, "r9", {Text("Hello ")});  // talker: r9 -> K1
  Out(0, 0, "r9", {Text("wor")});
  Out(1, 1, "r9", {Codes({1, 2})});  // vocoder: r9 -> W0
  EXPECT_THAT(core().pool(1).Bound("r9"), Optional(1));
  ClearLog();

  absl::StatusOr<v1::AbortResponse> aborted = AbortNow({"r9"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_THAT(Outcomes(*aborted), ElementsAre("r9=aborted"));
  EXPECT_THAT(log_, ElementsAre("T0.abort [r9]", "K1.abort [r9]", "W0.abort [r9]"));
  ASSERT_EQ(r9->terminal_count(), 1);
  const v1::Terminal t = r9->terminal();
  EXPECT_EQ(t.finish_reason(), v1::FINISH_REASON_ABORT);
  ASSERT_EQ(t.partial_output_size(), 1);
  EXPECT_EQ(t.partial_output(0).stage_id(), 0);
  EXPECT_EQ(t.partial_output(0).modality(), v1::MODALITY_TEXT);
  EXPECT_EQ(t.partial_output(0).payload().text().text(), "Hello wor");
  EXPECT_EQ(r9->Text("r9"), "Hello wor");

  // The other request is untouched and completes.
  Done(0, 0, "other");
  Out(1, 0, "other", {Codes({5})}, true);
  Done(2, 0, "other", {Audio("pcm")});
  EXPECT_EQ(other->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(PipelineCoreTest, OnFinishHandOffSendsAllOutputOnceTheStageFinished) {
  Build(Shape().TalkerInput(InputMode::kOnFinish));
  auto sink = Gen("r1");
  ASSERT_EQ(fake(0, 0).adds().size(), 1u);
  const v1::AddRequest& first = fake(0, 0).adds()[0];
  EXPECT_TRUE(first.input_complete());
  ASSERT_EQ(first.input_size(), 1);
  EXPECT_EQ(first.input(0).text().text(), "Hi there");

  Out(0, 0, "r1", {Text("Hel")});
  Out(0, 0, "r1", {Text("lo"), Text(" you")});
  EXPECT_THAT(LogWith("K0"), IsEmpty()) << "talker started before the thinker finished";
  Done(0, 0, "r1", {Text("!")});
  ASSERT_EQ(fake(1, 0).adds().size(), 1u);
  const v1::AddRequest& add = fake(1, 0).adds()[0];
  EXPECT_EQ(add.request_id(), "r1");
  EXPECT_TRUE(add.input_complete());
  ASSERT_EQ(add.input_size(), 4);
  EXPECT_EQ(add.input(0).text().text(), "Hel");
  EXPECT_EQ(add.input(2).text().text(), " you");
  EXPECT_EQ(add.input(3).text().text(), "!");
  EXPECT_EQ(sink->Text("r1"), "Hello you!");
  EXPECT_EQ(sink->end_count(), 0) << "the audio stage has not finished";
  EXPECT_EQ(core().pool(0).bindings(), 0u) << "a finished stage releases its binding";

  Out(1, 0, "r1", {Codes({7})}, /*finished=*/true);
  Done(2, 0, "r1", {Audio("pcm1")});
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_TRUE(sink->terminal().partial_output().empty());
}

TEST_F(PipelineCoreTest, StreamingHandOffAddsOnFirstChunkThenAppends) {
  Build();
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("a")});
  ASSERT_EQ(fake(1, 0).adds().size(), 1u);
  EXPECT_FALSE(fake(1, 0).adds()[0].input_complete());
  EXPECT_EQ(fake(1, 0).adds()[0].input(0).text().text(), "a");
  Out(0, 0, "r1", {});  // Nothing new: nothing to forward.
  Out(0, 0, "r1", {Text("b")});
  Out(1, 0, "r1", {Codes({1})});
  Out(1, 0, "r1", {Codes({2})});
  Done(0, 0, "r1", {Text("c")});
  Out(1, 0, "r1", {Codes({3})}, /*finished=*/true);
  Out(2, 0, "r1", {Audio("p1")});
  Done(2, 0, "r1", {Audio("p2")});
  EXPECT_THAT(log_, ElementsAre("T0.add r1", "K0.add r1", "K0.append r1", "W0.add r1",
                                "W0.append r1", "K0.append r1 last", "W0.append r1 last"));
  EXPECT_FALSE(fake(2, 0).adds()[0].input_complete());
  EXPECT_EQ(fake(2, 0).adds()[0].input(0).tokens().ids(0), 1);
  ASSERT_EQ(fake(1, 0).appends().size(), 2u);
  EXPECT_EQ(fake(1, 0).appends()[0].chunks(0).text().text(), "b");
  EXPECT_EQ(fake(1, 0).appends()[1].chunks(0).text().text(), "c");
  EXPECT_EQ(fake(2, 0).appends()[1].chunks(0).tokens().ids(0), 3);

  // Final outputs reach the client tagged with their stage and modality.
  std::vector<std::string> seen;
  for (const v1::OutputChunk& c : sink->chunks("r1")) {
    seen.push_back(absl::StrCat(c.stage_id(), ":", ModalityName(c.modality())));
  }
  EXPECT_THAT(seen, ElementsAre("0:text", "0:text", "0:text", "2:audio", "2:audio"));
  EXPECT_EQ(sink->chunks("r1")[3].payload().audio().pcm_s16le(), "p1");
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal_id(), "r1");
}

TEST_F(PipelineCoreTest, TextOnlyRequestNeverStartsTheTalker) {
  Build();
  auto sink = Gen("t", {v1::MODALITY_TEXT});
  Out(0, 0, "t", {Text("Hi")});
  EXPECT_EQ(sink->end_count(), 0);
  Done(0, 0, "t", {Text("!")});
  Out(0, 0, "t", {Text("late")});  // Ended: dropped.
  EXPECT_EQ(sink->Text("t"), "Hi!");
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_THAT(LogWith("K"), IsEmpty());
  EXPECT_THAT(LogWith("W"), IsEmpty());
}

TEST_F(PipelineCoreTest, AudioOnlyRequestRunsTheThinkerButStreamsOnlyAudio) {
  Build();
  auto sink = Gen("a", {v1::MODALITY_AUDIO});
  Out(0, 0, "a", {Text("Hi")});
  EXPECT_EQ(sink->send_calls(), 0) << "thinker text streamed to an audio-only client";
  EXPECT_EQ(fake(1, 0).adds().size(), 1u);
  Done(0, 0, "a");
  Out(1, 0, "a", {Codes({4})}, true);
  EXPECT_EQ(sink->end_count(), 0);
  Done(2, 0, "a", {Audio("pcm")});
  ASSERT_EQ(sink->chunks("a").size(), 1u);
  EXPECT_EQ(sink->chunks("a")[0].stage_id(), 2);
  EXPECT_EQ(sink->chunks("a")[0].modality(), v1::MODALITY_AUDIO);
  EXPECT_EQ(sink->terminal_count(), 1);
}

// A final stage that stops early (max_tokens) ends the request; the stages
// still feeding it are aborted.
TEST_F(PipelineCoreTest, FinalStageEndingEarlyAbortsUpstreamStages) {
  Build();
  auto sink = Gen("r1", {v1::MODALITY_AUDIO});
  Out(0, 0, "r1", {Text("a")});
  Out(1, 0, "r1", {Codes({1})});
  ClearLog();
  Out(2, 0, "r1", {Audio("pcm")}, /*finished=*/true, v1::FINISH_REASON_LENGTH);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_THAT(log_, ElementsAre("T0.abort [r1]", "K0.abort [r1]"));
  Out(1, 0, "r1", {Codes({2})});  // Stale: dropped.
}

TEST_F(PipelineCoreTest, RequestParamsOverrideStageDefaults) {
  PipelineConfig config = OmniConfig(Shape());
  config.stages[0].defaults.set_max_tokens(64);
  config.stages[0].defaults.set_temperature(0.5f);
  (*config.stages[0].defaults.mutable_extra())["top_p"] = "0.9";
  config.stages[1].defaults.set_max_tokens(500);
  config.stages[1].defaults.set_seed(7);
  (*config.stages[1].defaults.mutable_extra())["voice"] = "a";
  Build(std::move(config));
  v1::GenerateRequest request;
  request.set_request_id("p");
  request.set_prompt("Hi");
  v1::StageParameters* talker = request.add_stage_params();
  talker->set_stage_id(1);
  talker->set_max_tokens(20);
  (*talker->mutable_extra())["voice"] = "b";
  (*talker->mutable_extra())["speed"] = "1.5";
  request.add_stage_params()->set_stage_id(2);
  auto sink = Gen(request);
  Out(0, 0, "p", {Text("x")});

  const v1::StageParameters& t = fake(0, 0).adds()[0].params();
  EXPECT_EQ(t.stage_id(), 0);
  EXPECT_EQ(t.max_tokens(), 64u);
  EXPECT_FLOAT_EQ(t.temperature(), 0.5f);
  EXPECT_FALSE(t.has_seed());
  EXPECT_EQ(t.extra().at("top_p"), "0.9");
  const v1::StageParameters& k = fake(1, 0).adds()[0].params();
  EXPECT_EQ(k.stage_id(), 1);
  EXPECT_EQ(k.max_tokens(), 20u);
  EXPECT_EQ(k.seed(), 7u);
  EXPECT_FALSE(k.has_temperature());
  EXPECT_EQ(k.extra().at("voice"), "b");
  EXPECT_EQ(k.extra().at("speed"), "1.5");
  EXPECT_TRUE(AbortNow({"p"}).ok());
}

TEST_F(PipelineCoreTest, RoundRobinAcrossReplicasAndStickyAppends) {
  Build(Shape().Thinkers(2).Talkers(2));
  auto s1 = Gen("r1");
  auto s2 = Gen("r2");
  EXPECT_THAT(LogWith(".add"), ElementsAre("T0.add r1", "T1.add r2"));
  Out(0, 1, "r2", {Text("a")});      // talker: r2 -> K0
  Out(0, 0, "r1", {Text("b")});      // talker: r1 -> K1
  Out(0, 1, "r1", {Text("stray")});  // r1 is not on T1: ignored.
  EXPECT_EQ(s1->Text("r1"), "b");
  Out(0, 0, "r1", {Text("c")});
  Out(0, 1, "r2", {Text("d")});
  Done(0, 0, "r1");
  Done(0, 1, "r2");
  EXPECT_THAT(LogWith("K"), ElementsAre("K0.add r2", "K1.add r1", "K1.append r1", "K0.append r2",
                                        "K1.append r1 last", "K0.append r2 last"));
  const v1::PipelineStatus status = core().Status();
  EXPECT_EQ(status.stages(1).replicas(0).bound_requests(), 1);
  EXPECT_EQ(status.stages(1).replicas(1).bound_requests(), 1);
  EXPECT_EQ(status.stages(0).replicas(0).bound_requests(), 0);
  for (auto [id, k] : {std::pair<const char*, int>{"r1", 1}, {"r2", 0}}) {
    Out(1, k, id, {Codes({1})}, true);
    Done(2, 0, id);
  }
  EXPECT_EQ(s1->terminal_count(), 1);
  EXPECT_EQ(s2->terminal_count(), 1);
}

TEST_F(PipelineCoreTest, StatusReportsStagesReplicasAndBindings) {
  Build(Shape().Talkers(2));
  core().set_replica_address(1, 1, "talker1:7000");
  auto sink = Gen("s");
  Out(0, 0, "s", {Text("x")});
  core().OnReplicaDown(1, 1, absl::UnavailableError("keepalive timeout"));
  v1::PipelineStatus status = core().Status();
  EXPECT_EQ(status.in_flight_requests(), 1);
  EXPECT_TRUE(status.accepting());
  ASSERT_EQ(status.stages_size(), 3);
  EXPECT_EQ(status.stages(1).name(), "talker");
  EXPECT_EQ(status.stages(1).engine(), "sim_talker");
  EXPECT_FALSE(status.stages(1).final_output());
  EXPECT_EQ(status.stages(2).output_modality(), v1::MODALITY_AUDIO);
  EXPECT_TRUE(status.stages(2).final_output());
  ASSERT_EQ(status.stages(1).replicas_size(), 2);
  const v1::ReplicaStatus& k0 = status.stages(1).replicas(0);
  EXPECT_TRUE(k0.alive());
  EXPECT_EQ(k0.instance_id(), "K0#1");
  EXPECT_EQ(k0.capacity(), 8);
  EXPECT_EQ(k0.bound_requests(), 1);
  const v1::ReplicaStatus& k1 = status.stages(1).replicas(1);
  EXPECT_FALSE(k1.alive());
  EXPECT_EQ(k1.address(), "talker1:7000");
  EXPECT_EQ(k1.last_error(), "keepalive timeout");
  EXPECT_EQ(k1.bound_requests(), 0);

  Ready(1, 1, "#2");
  status = core().Status();
  EXPECT_TRUE(status.stages(1).replicas(1).alive());
  EXPECT_EQ(status.stages(1).replicas(1).instance_id(), "K1#2");
  EXPECT_EQ(status.stages(1).replicas(1).last_error(), "");
  EXPECT_TRUE(AbortNow({"s"}).ok());
}

TEST_F(PipelineCoreTest, StageUtilityFansOutToEveryReplica) {
  Build(Shape().Talkers(3));
  core().set_replica_address(1, 0, "talker0:7000");
  core().OnReplicaDown(1, 1, absl::UnavailableError("gone"));
  fake(1, 2).set_utility_result(absl::FailedPreconditionError("no profiler"));
  v1::StageUtilityRequest request;
  request.set_stage_id(1);
  request.set_name("profile");
  absl::StatusOr<v1::StageUtilityResponse> got = absl::UnknownError("not called");
  int calls = 0;
  auto done = [&](absl::StatusOr<v1::StageUtilityResponse> r) {
    ++calls;
    got = std::move(r);
  };
  core().CallStageUtility(request, done);
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(LogWith("utility"), ElementsAre("K0.utility profile", "K2.utility profile"));
  ASSERT_EQ(got->results_size(), 3);
  EXPECT_EQ(got->results(0).replica(), 0);
  EXPECT_EQ(got->results(0).address(), "talker0:7000");
  EXPECT_EQ(got->results(0).value().string_value(), "ok");
  ASSERT_TRUE(got->results(1).has_error());
  EXPECT_EQ(got->results(1).error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(got->results(1).error().message(), HasSubstr("stage 1 (talker) replica 1"));
  ASSERT_TRUE(got->results(2).has_error());
  EXPECT_EQ(got->results(2).error().code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(got->results(2).error().message(), HasSubstr("no profiler"));

  request.set_stage_id(3);
  core().CallStageUtility(request, done);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  request.set_stage_id(0);
  request.clear_name();
  core().CallStageUtility(request, done);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 3);
}

TEST_F(PipelineCoreTest, DrainStopsAdmissionAndReportsWhenTheLastRequestEnds) {
  Build();
  int drained = 0;
  core().Drain(absl::InfiniteFuture(), [&] { ++drained; });
  EXPECT_EQ(drained, 1) << "nothing in flight: drained at once";

  Build();
  auto a = Gen("a", {v1::MODALITY_TEXT});
  auto b = Gen("b", {v1::MODALITY_TEXT});
  core().Drain(absl::InfiniteFuture(), [&] { ++drained; });
  EXPECT_FALSE(core().Status().accepting());
  auto late = Gen("late");
  EXPECT_EQ(late->fail_status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(late->fail_status().message(), HasSubstr("draining"));
  Done(0, 0, "a");
  EXPECT_EQ(drained, 1) << "drained while b was still in flight";
  Out(0, 0, "b", {Text("more")});
  Done(0, 0, "b");
  EXPECT_EQ(drained, 2);
  EXPECT_EQ(b->Text("b"), "more");
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
