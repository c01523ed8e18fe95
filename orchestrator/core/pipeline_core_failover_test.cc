// Tests for PipelineCore's failover (docs/reliability.md, "Failover"): a
// request a replica loses resumes on another replica of its stage, with the
// stage's whole input; a replayed run's first part is dropped (and checked),
// a continuation is sent what was produced; bounds, opting out, and aborts
// that race a failover. Every test ends with the invariant check. Fakes only.
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
using ::testing::Optional;

// Token ids of every tokens payload in `payloads`, in order.
template <typename Payloads>
std::vector<int32_t> Ids(const Payloads& payloads) {
  std::vector<int32_t> ids;
  for (const v1::Payload& p : payloads)
    ids.insert(ids.end(), p.tokens().ids().begin(), p.tokens().ids().end());
  return ids;
}

std::string Texts(const google::protobuf::RepeatedPtrField<v1::Payload>& payloads) {
  std::string text;
  for (const v1::Payload& p : payloads) text += p.text().text();
  return text;
}

class FailoverTest : public PipelineCoreTest {
 protected:
  // The omni shape with failover on `stage` (max_attempts `attempts`); every
  // replica resumes by `resume`.
  void BuildWithFailover(Shape shape, int stage, int attempts = 2,
                         v1::ResumeMode resume = v1::RESUME_MODE_REPLAY) {
    PipelineConfig config = OmniConfig(shape);
    config.stages[stage].failover_max_attempts = attempts;
    resume_ = resume;
    Build(std::move(config));
  }

  // What the vocoder (W0) was given for `id`: its add's input and every append.
  std::vector<int32_t> VocoderCodes(const std::string& id) {
    std::vector<int32_t> codes;
    for (const v1::AddRequest& add : fake(2, 0).adds()) {
      if (add.request_id() == id) codes = Ids(add.input());
    }
    for (const v1::AppendInput& append : fake(2, 0).appends()) {
      if (append.request_id() != id) continue;
      for (int32_t c : Ids(append.chunks())) codes.push_back(c);
    }
    return codes;
  }

  std::string Metrics() { return core().metrics_registry().Render(); }

  // A client's Abort of `id` while its talker replica K0 dies: the abort
  // waits on K0 as it goes; nothing starts on K1 meanwhile. Then K0's abort
  // call fails with the broken stream, and the vocoder's succeeds unless
  // `vocoder_fails`. Returns the Abort's answer.
  absl::StatusOr<v1::AbortResponse> AbortWhileTheTalkerDies(const std::string& id,
                                                            bool vocoder_fails) {
    fake(1, 0).set_hold_aborts(true);
    if (vocoder_fails) fake(2, 0).FailAborts(absl::UnavailableError("vocoder busy"));
    absl::StatusOr<v1::AbortResponse> result = absl::UnknownError("not answered");
    v1::AbortRequest request;
    request.add_request_ids(id);
    core().Abort(
        request, absl::InfiniteFuture(),
        [&result](absl::StatusOr<v1::AbortResponse> r) { result = std::move(r); }, Caller());
    core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
    EXPECT_THAT(LogWith("K1"), IsEmpty());
    EXPECT_TRUE(fake(1, 0).CompleteAbort(absl::UnavailableError("stream broke")));
    fake(2, 0).FailAborts(absl::OkStatus());
    return result;
  }
};

TEST_F(FailoverTest, AMiddleStageReplayResumesWithTheWholeInputAndDropsWhatWasDelivered) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hello ")});  // -> K0.add
  Out(0, 0, "r1", {Text("world")});   // -> K0.append
  Out(1, 0, "r1", {Codes({1, 2})});   // -> W0.add
  ClearLog();
  core().OnReplicaDown(1, 0, absl::UnavailableError("connection reset"));
  // Started again on K1 with everything the talker had received, still open.
  EXPECT_THAT(log_, ElementsAre("K1.add r1"));
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  const v1::AddRequest& add = fake(1, 1).adds()[0];
  EXPECT_EQ(Texts(add.input()), "Hello world");
  EXPECT_FALSE(add.input_complete());
  EXPECT_TRUE(add.produced().empty());
  EXPECT_THAT(core().pool(1).Bound("r1"), Optional(1));
  EXPECT_EQ(sink->end_count(), 0);
  // The replay repeats 1, 2 and goes on: only 3 reaches the vocoder.
  Out(1, 1, "r1", {Codes({1})});
  Out(1, 1, "r1", {Codes({2, 3})});
  Out(0, 0, "r1", {Text("!")}, true);  // The rest of the input goes to K1.
  EXPECT_THAT(LogWith("K1.append"), ElementsAre("K1.append r1 last"));
  Out(1, 1, "r1", {Codes({4})}, true);
  EXPECT_THAT(VocoderCodes("r1"), ElementsAre(1, 2, 3, 4));
  Done(2, 0, "r1", {Audio("pcm")});
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(sink->Text("r1"), "Hello world!");
  EXPECT_THAT(Metrics(),
              HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"resumed\"} 1"));
}

TEST_F(FailoverTest, TheFirstStageResumesFromThePromptAndTheClientSeesNoRepeat) {
  BuildWithFailover(Shape().Thinkers(2), 0);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hel")});
  core().OnReplicaDown(0, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(fake(0, 1).adds().size(), 1u);
  EXPECT_EQ(Texts(fake(0, 1).adds()[0].input()), "Hi there");
  EXPECT_TRUE(fake(0, 1).adds()[0].input_complete());
  Out(0, 1, "r1", {Text("He")});
  Out(0, 1, "r1", {Text("llo")});  // "l" was delivered, "lo" was not.
  Out(0, 1, "r1", {Text(" you")}, true);
  EXPECT_EQ(sink->Text("r1"), "Hello you");
  // The talker was fed the same text, once.
  std::string talker_input = Texts(fake(1, 0).adds()[0].input());
  for (const v1::AppendInput& append : fake(1, 0).appends()) talker_input += Texts(append.chunks());
  EXPECT_EQ(talker_input, "Hello you");
  Done(1, 0, "r1", {Codes({1})});
  Done(2, 0, "r1", {Audio("pcm")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, TheLastStageDropsDeliveredAudioMidChunk) {
  BuildWithFailover(Shape().Vocoders(2), 2);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  Out(1, 0, "r1", {Codes({1, 2})}, true);  // -> W0.add, complete
  Out(2, 0, "r1", {Audio("abcd")});
  core().OnReplicaDown(2, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(fake(2, 1).adds().size(), 1u);
  EXPECT_THAT(Ids(fake(2, 1).adds()[0].input()), ElementsAre(1, 2));
  EXPECT_TRUE(fake(2, 1).adds()[0].input_complete());
  Out(2, 1, "r1", {Audio("abcdef")});
  Done(2, 1, "r1", {Audio("gh")});
  std::string audio;
  for (const v1::OutputChunk& chunk : sink->chunks("r1")) {
    if (chunk.payload().has_audio()) audio += chunk.payload().audio().pcm_s16le();
  }
  EXPECT_EQ(audio, "abcdefgh");
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, AReplayThatDiffersFailsTheRequestInsteadOfPassingItOn) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  Out(1, 0, "r1", {Codes({1, 2})});
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  Out(1, 1, "r1", {Codes({1, 9, 3})});
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Terminal terminal = sink->terminal();
  const v1::Error& error = terminal.error();
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_EQ(error.stage_id(), 1);
  EXPECT_EQ(error.replica(), 1);
  EXPECT_THAT(error.message(), HasSubstr("not deterministic"));
  EXPECT_THAT(VocoderCodes("r1"), ElementsAre(1, 2));  // Nothing of the bad replay.
  EXPECT_THAT(
      Metrics(),
      HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"replay_mismatch\"} 1"));
}

TEST_F(FailoverTest, AReplayThatEndsShortFails) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  Out(1, 0, "r1", {Codes({1, 2})});
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  Done(1, 1, "r1", {Codes({1})});
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().error().code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("1 of 2 token ids"));
}

TEST_F(FailoverTest, AContinuationIsSentWhatWasProducedAndNothingIsDropped) {
  BuildWithFailover(Shape().Talkers(2), 1, 2, v1::RESUME_MODE_CONTINUATION);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  Out(1, 0, "r1", {Codes({1})});
  Out(1, 0, "r1", {Codes({2})});
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  const v1::AddRequest& add = fake(1, 1).adds()[0];
  ASSERT_EQ(add.produced_size(), 1);
  EXPECT_THAT(Ids(add.produced()), ElementsAre(1, 2));
  Done(1, 1, "r1", {Codes({3})});
  EXPECT_THAT(VocoderCodes("r1"), ElementsAre(1, 2, 3));
  Done(2, 0, "r1", {Audio("pcm")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, AnEngineThatCannotResumeIsStartedAgainOnlyIfItHadDeliveredNothing) {
  BuildWithFailover(Shape().Talkers(2), 1, 2, v1::RESUME_MODE_UNSPECIFIED);
  auto quiet = Gen("quiet");
  auto spoken = Gen("spoken");
  Out(0, 0, "quiet", {Text("Hi")}, true);
  Out(0, 0, "spoken", {Text("Yo")}, true);
  const int quiet_on = *core().pool(1).Bound("quiet");
  const int spoken_on = *core().pool(1).Bound("spoken");
  ASSERT_NE(spoken_on, quiet_on);
  Out(1, spoken_on, "spoken", {Codes({1})});
  // "spoken" delivered something its engine cannot reproduce: it fails,
  // saying why, although another replica lives.
  core().OnReplicaDown(1, spoken_on, absl::UnavailableError("killed"));
  ASSERT_EQ(spoken->terminal_count(), 1);
  EXPECT_THAT(spoken->terminal().error().message(), HasSubstr("declares no way to resume"));
  EXPECT_THAT(Metrics(),
              HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"not_resumable\"} 1"));
  // "quiet" had delivered nothing: it simply starts again elsewhere.
  Ready(1, spoken_on, "#2");
  core().OnReplicaDown(1, quiet_on, absl::UnavailableError("killed"));
  EXPECT_THAT(core().pool(1).Bound("quiet"), Optional(spoken_on));
  Done(1, spoken_on, "quiet", {Codes({5})});
  Done(2, 0, "quiet", {Audio("pcm")});
  EXPECT_EQ(quiet->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, WithNoLiveReplicaLeftTheRequestFailsNamingTheStage) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  core().OnReplicaDown(1, 1, absl::UnavailableError("killed"));
  core().OnReplicaDown(1, 0, absl::UnavailableError("connection reset"));
  ASSERT_EQ(sink->terminal_count(), 1);
  const v1::Terminal terminal = sink->terminal();
  const v1::Error& error = terminal.error();
  EXPECT_EQ(error.stage_id(), 1);
  EXPECT_EQ(error.replica(), 0);
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(error.message(), HasSubstr("talker"));
  EXPECT_THAT(error.message(), HasSubstr("connection reset"));
  EXPECT_THAT(error.message(), HasSubstr("no other live replica"));
  EXPECT_THAT(
      Metrics(),
      HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"no_live_replica\"} 1"));
}

TEST_F(FailoverTest, AttemptsAreBounded) {
  BuildWithFailover(Shape().Talkers(3), 1, /*attempts=*/1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  const int resumed_on = *core().pool(1).Bound("r1");
  core().OnReplicaDown(1, resumed_on, absl::UnavailableError("killed again"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("failover.max_attempts"));
  EXPECT_THAT(
      Metrics(),
      HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"attempts_exhausted\"} 1"));
}

TEST_F(FailoverTest, ARequestThatOptsOutFailsAsWithoutFailover) {
  BuildWithFailover(Shape().Talkers(2), 1);
  v1::GenerateRequest request;
  request.set_request_id("r1");
  request.set_prompt("Hi");
  request.set_disable_failover(true);
  auto sink = Gen(request);
  Out(0, 0, "r1", {Text("Hi")}, true);
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("died: killed"));
  EXPECT_THAT(LogWith("K1"), IsEmpty());
}

TEST_F(FailoverTest, PastMaxReplayBytesTheRequestNoLongerFailsOver) {
  PipelineConfig config = OmniConfig(Shape().Talkers(2));
  config.stages[1].failover_max_attempts = 2;
  config.max_replay_bytes = 64;
  resume_ = v1::RESUME_MODE_REPLAY;
  Build(std::move(config));
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text(std::string(100, 'x'))});
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_THAT(sink->terminal().error().message(), HasSubstr("limits.max_replay_bytes (64)"));
  EXPECT_THAT(
      Metrics(),
      HasSubstr("omnistage_failovers_total{stage=\"talker\",outcome=\"replay_too_large\"} 1"));
}

TEST_F(FailoverTest, AReplayUnderWayStillDropsWhatItRepeatsOncePastTheBound) {
  PipelineConfig config = OmniConfig(Shape().Talkers(2));
  config.stages[1].failover_max_attempts = 2;
  config.max_replay_bytes = 64;
  resume_ = v1::RESUME_MODE_REPLAY;
  Build(std::move(config));
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi ")});
  Out(1, 0, "r1", {Codes({1, 2})});
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  // More input than the bound: the request fails over no more, but the
  // replay on K1 has yet to pass what the vocoder already has.
  Out(0, 0, "r1", {Text(std::string(100, 'x'))}, true);
  Out(1, 1, "r1", {Codes({1, 2, 3})}, true);
  EXPECT_THAT(VocoderCodes("r1"), ElementsAre(1, 2, 3));
  Done(2, 0, "r1", {Audio("pcm")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, AFailedSendResumesElsewhere) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi ")});  // -> K0.add
  fake(1, 0).FailCommands(absl::UnavailableError("session closed"));
  Out(0, 0, "r1", {Text("there")}, true);  // The append fails: K0 is gone.
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  EXPECT_EQ(Texts(fake(1, 1).adds()[0].input()), "Hi there");
  EXPECT_TRUE(fake(1, 1).adds()[0].input_complete());
  Done(1, 1, "r1", {Codes({1})});
  Done(2, 0, "r1", {Audio("pcm")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, AStallAndADrainTimeoutMoveRequestsInsteadOfFailingThem) {
  BuildWithFailover(Shape().Talkers(3), 1);
  auto a = Gen("a");
  auto b = Gen("b");
  Out(0, 0, "a", {Text("A")}, true);
  Out(0, 0, "b", {Text("B")}, true);
  ASSERT_THAT(core().pool(1).Bound("a"), Optional(0));
  ASSERT_THAT(core().pool(1).Bound("b"), Optional(1));
  // K1 drains, and its drain timeout stops "b": it moves to a live replica.
  core().OnReplicaDraining(1, 1, v1::Draining());
  Out(1, 1, "b", {}, true, v1::FINISH_REASON_ABORT);
  EXPECT_THAT(core().pool(1).Bound("b"), Optional(0));
  // K0 stalls: both move to K2, the only live one left.
  v1::Stalled stall;
  stall.set_step(7);
  core().OnReplicaStalled(1, 0, stall);
  EXPECT_THAT(core().pool(1).Bound("a"), Optional(2));
  EXPECT_THAT(core().pool(1).Bound("b"), Optional(2));
  EXPECT_EQ(a->end_count() + b->end_count(), 0);
  for (const char* id : {"a", "b"}) {
    Done(1, 2, id, {Codes({1})});
    Done(2, 0, id, {Audio("pcm")});
  }
  EXPECT_EQ(a->terminal().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(b->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, AnAbortRacingAFailoverStopsTheRequestEverywhere) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")});
  Out(1, 0, "r1", {Codes({1})});
  // The replica's end answers for the abort there: it goes on and commits.
  absl::StatusOr<v1::AbortResponse> result = AbortWhileTheTalkerDies("r1", false);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_ABORT);
  EXPECT_THAT(LogWith("K1"), IsEmpty());
}

TEST_F(FailoverTest, AnAbortThatFailsDuringAFailoverLetsTheRequestResume) {
  BuildWithFailover(Shape().Talkers(2), 1);
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  Out(1, 0, "r1", {Codes({1})});
  absl::StatusOr<v1::AbortResponse> result = AbortWhileTheTalkerDies("r1", true);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->results(0).outcome(), v1::AbortResult::OUTCOME_FAILED);
  // The request goes on: the talker resumes on K1, from its whole input.
  EXPECT_EQ(sink->end_count(), 0);
  ASSERT_EQ(fake(1, 1).adds().size(), 1u);
  EXPECT_EQ(Texts(fake(1, 1).adds()[0].input()), "Hi");
  Out(1, 1, "r1", {Codes({1, 2})}, true);
  EXPECT_THAT(VocoderCodes("r1"), ElementsAre(1, 2));
  Done(2, 0, "r1", {Audio("pcm")});
  EXPECT_EQ(sink->terminal().finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(FailoverTest, WithoutFailoverALostReplicaFailsItsRequestsAsBefore) {
  resume_ = v1::RESUME_MODE_REPLAY;
  Build(Shape().Talkers(2));
  auto sink = Gen("r1");
  Out(0, 0, "r1", {Text("Hi")}, true);
  core().OnReplicaDown(1, 0, absl::UnavailableError("killed"));
  ASSERT_EQ(sink->terminal_count(), 1);
  EXPECT_EQ(sink->terminal().error().message(), "stage 1 (talker) replica 0 died: killed");
  EXPECT_THAT(LogWith("K1"), IsEmpty());
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
