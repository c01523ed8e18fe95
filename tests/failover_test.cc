// Failover (docs/reliability.md) as processes: with `failover:` on a stage, a
// replica killed with SIGKILL under load fails none of its requests while
// another replica of the stage lives — each is resumed there and its client
// receives, byte for byte, what the fault-free run of the same seeded request
// delivered — at the first, a middle and the last stage; with no live replica
// left the requests fail naming the stage, and a request that opts out
// (disable_failover) fails as without failover. Stalls, drain timeouts and
// aborts racing a failover: failover_hang_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/failover_metrics.h"
#include "tests/failover_test_util.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kVictim = 1;
constexpr int kRequests = 64;
// About 150 thinker words of 10 ms each: seconds of streaming on every stage.
constexpr int kSentences = 25;

// OmniSpec with two replicas of `stage`, failover on there, and /metrics. A
// kill -9 is seen at once (the kernel resets the connections); keepalive is
// only made patient, since 64 streams of audio on a loaded 2-core machine once
// kept the orchestrator from answering a 500 ms ping in time, and every replica
// of the fault-free run looked dead.
PipelineSpec OmniFailoverSpec(int stage) {
  PipelineSpec spec = OmniSpec(/*thinker_step_us=*/10000, "streaming", "ms_per_code=5");
  spec.keepalive_ms = 2000;
  spec.keepalive_timeout_ms = 10000;
  spec.stages[stage].replicas = 2;
  spec.stages[stage].failover_max_attempts = 3;
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  return spec;
}

std::vector<v1::GenerateRequest> OmniRequests() {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(SeededOmniRequest(absl::StrCat("omni-", i), i, kSentences));
  }
  return requests;
}

// 64 seeded omni requests fault-free, then again with replica kVictim of
// `stage` killed once every request streams audio (so it is under way on all
// three stages): every request delivers what it delivered fault-free.
void ExpectKillChangesNoContent(int stage) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(OmniFailoverSpec(stage));
  ASSERT_NE(pipeline, nullptr);
  const std::vector<v1::GenerateRequest> requests = OmniRequests();
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(requests, "clean-"));
  int victims = 0;
  const std::vector<GenerateResult> results =
      RunWithFault(*pipeline, Renamed(requests, "fault-"), HasAudio, [&] {
        victims = BoundTo(*pipeline, stage, kVictim);
        pipeline->KillWorker(stage, kVictim);
      });
  EXPECT_GT(victims, 0) << "the killed replica held none of the requests";
  for (int i = 0; i < kRequests; ++i) ExpectSameContent(results[i], clean[i]);
  absl::StatusOr<int64_t> resumed = FailoverCount(
      pipeline->orchestrator_metrics_port(), pipeline->spec().stages[stage].name, "resumed");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_GE(*resumed, 1) << "no resumed request was counted";
}

TEST(PipelineFailoverTest, KilledMiddleStageReplicaFailsNothingAndChangesNoContent) {
  ExpectKillChangesNoContent(/*stage=*/1);  // The talker: streaming in, streaming out.
}

TEST(PipelineFailoverTest, KilledFirstStageReplicaFailsNothingAndChangesNoContent) {
  ExpectKillChangesNoContent(/*stage=*/0);  // The thinker: resumed from the prompt.
}

TEST(PipelineFailoverTest, KilledLastStageReplicaFailsNothingAndChangesNoContent) {
  ExpectKillChangesNoContent(/*stage=*/2);  // The vocoder: resumed from the talker's codes.
}

// One sim_llm stage "llm" of two replicas, 2 ms steps, failover on, /metrics.
PipelineSpec OneStageSpec() {
  PipelineSpec spec;
  spec.name = "one";
  StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000", 2, true, "tokens");
  llm.failover_max_attempts = 3;
  spec.stages.push_back(llm);
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  return spec;
}

std::vector<v1::GenerateRequest> SimRequests(const std::string& prefix, int n,
                                             const std::vector<uint32_t>& tokens) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(SeededSimRequest(absl::StrCat(prefix, i), i, tokens));
  }
  return requests;
}

// The last stage of a sim_llm pipeline (it is also its only one), and the
// counter: each request the dead replica held is counted once as resumed.
TEST(PipelineFailoverTest, ResumedRequestsAreCountedAndWhole) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(OneStageSpec());
  ASSERT_NE(pipeline, nullptr);
  // >= 3 s each: none ends between the status read and the kill.
  const std::vector<v1::GenerateRequest> requests = SimRequests("sim-", 16, {1500});
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(requests, "clean-"));
  absl::StatusOr<int64_t> before =
      FailoverCount(pipeline->orchestrator_metrics_port(), "llm", "resumed");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*before, 0);
  int victims = 0;
  const std::vector<GenerateResult> results =
      RunWithFault(*pipeline, Renamed(requests, "fault-"), HasOutput, [&] {
        victims = BoundTo(*pipeline, 0, kVictim);
        pipeline->KillWorker(0, kVictim);
      });
  ASSERT_GT(victims, 0);
  for (size_t i = 0; i < results.size(); ++i) ExpectSameContent(results[i], clean[i]);
  absl::StatusOr<std::string> metrics = ScrapeMetrics(pipeline->orchestrator_metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(FailoverCountIn(*metrics, "llm", "resumed"), victims) << *metrics;
  for (const char* outcome : {"no_live_replica", "attempts_exhausted", "replay_too_large",
                              "not_resumable", "replay_mismatch"}) {
    EXPECT_EQ(FailoverCountIn(*metrics, "llm", outcome), 0) << outcome;
  }
}

// A request with disable_failover on the killed replica fails, naming the stage
// and the replica, as without failover; every other request, on either replica,
// ends whole.
TEST(PipelineFailoverTest, RequestThatDisablesFailoverFailsWhileTheOthersResume) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(OneStageSpec());
  ASSERT_NE(pipeline, nullptr);
  std::vector<v1::GenerateRequest> requests = SimRequests("opt-", 16, {1500});
  // Round-robin places them 0, 1, 0, 1, ...: both replicas get some of each kind.
  for (size_t i = 0; i < requests.size(); ++i) requests[i].set_disable_failover(i % 4 < 2);
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(requests, "clean-"));
  std::vector<PlacedCall> placed = StartPlaced(*pipeline, Renamed(requests, "fault-"));
  int opted_out_on_victim = 0;
  int resumable_on_victim = 0;
  for (size_t i = 0; i < placed.size(); ++i) {
    if (placed[i].replica != kVictim) continue;
    ++(requests[i].disable_failover() ? opted_out_on_victim : resumable_on_victim);
  }
  ASSERT_GT(opted_out_on_victim, 0) << "no opted-out request on the victim";
  ASSERT_GT(resumable_on_victim, 0) << "no resumable request on the victim";
  pipeline->KillWorker(0, kVictim);

  for (size_t i = 0; i < placed.size(); ++i) {
    const GenerateResult r = placed[i].call->Wait(absl::Seconds(90));
    if (placed[i].replica == kVictim && requests[i].disable_failover()) {
      ExpectOneTerminal(r);
      ASSERT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r.Summary();
      EXPECT_EQ(r.terminal.error().stage_id(), 0) << r.Summary();
      EXPECT_EQ(r.terminal.error().replica(), kVictim) << r.Summary();
      EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), "stage 0 (llm) replica 1"))
          << r.Summary();
    } else {
      ExpectSameContent(r, clean[i]);
    }
  }
  absl::StatusOr<int64_t> resumed =
      FailoverCount(pipeline->orchestrator_metrics_port(), "llm", "resumed");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, resumable_on_victim);
}

// Both replicas of a stage killed: the requests under way there end with an
// error naming the stage, none hangs; those already past it are untouched.
// (This holds without failover too: the no-live-replica edge of the feature.)
TEST(PipelineFailoverTest, BothReplicasKilledFailTheirRequestsNamingTheStage) {
  PipelineSpec spec;
  spec.name = "both";
  StageSpec draft = Stage("draft", "sim_llm", "batch_size=64,step_time_us=2000", 2, false, "tokens");
  draft.failover_max_attempts = 3;
  spec.stages.push_back(draft);
  spec.stages.push_back(
      Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000", 1, true, "tokens"));
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  constexpr int kEach = 8;
  // Past the draft within a few steps, then seconds on the llm stage.
  const std::vector<v1::GenerateRequest> past = SimRequests("past-", kEach, {3, 1500});
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(past, "clean-"));

  std::vector<std::unique_ptr<GenerateCall>> past_calls;
  for (const v1::GenerateRequest& request : past) {
    past_calls.push_back(pipeline->StartGenerate(request, absl::Seconds(120)));
  }
  for (auto& call : past_calls) {
    ASSERT_TRUE(call->WaitForOutput(absl::Seconds(60))) << call->Snapshot().Summary();
  }
  // Seconds on the draft: under way there when both replicas die.
  std::vector<std::unique_ptr<GenerateCall>> draft_calls;
  for (const v1::GenerateRequest& request : SimRequests("draft-", kEach, {3000, 5})) {
    draft_calls.push_back(pipeline->StartGenerate(request, absl::Seconds(120)));
  }
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
        if (!status.ok()) return false;
        const int bound = BoundRequests(*status, 0, 0) + BoundRequests(*status, 0, 1);
        seen = absl::StrCat(bound, " bound to the draft");
        return bound == kEach;
      },
      absl::Seconds(30)))
      << seen;
  pipeline->KillWorker(0, 0);
  pipeline->KillWorker(0, 1);

  for (auto& call : draft_calls) {
    const GenerateResult r = call->Wait(absl::Seconds(60));
    ASSERT_TRUE(r.done) << "hangs: " << r.Summary();
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r.Summary();
    EXPECT_EQ(r.terminal.error().stage_id(), 0) << r.Summary();
    EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), "draft")) << r.Summary();
  }
  for (int i = 0; i < kEach; ++i) ExpectSameContent(past_calls[i]->Wait(absl::Seconds(60)), clean[i]);
}

}  // namespace
}  // namespace omnistage
