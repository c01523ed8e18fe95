// Failover (docs/reliability.md) for the faults that do not kill a worker, as
// processes: a replica whose engine stalls (reported by the worker's step
// watchdog) and one whose drain timeout passes have their requests moved to the
// other replica of the stage, whole, instead of failed; and an Abort or a
// cancel racing a failover ends the request once, everywhere. Kills:
// failover_test.cc.
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/failover_test_util.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kVictim = 0;
constexpr int kRequests = 16;
constexpr char kParams[] = "batch_size=64,step_time_us=2000";

// One sim_llm stage "llm" of two replicas with failover on, and the workers'
// `flags`; the victim replica also gets `victim_flags`.
PipelineSpec LlmSpec(std::vector<std::string> flags, std::vector<std::string> victim_flags) {
  PipelineSpec spec;
  spec.name = "moved";
  StageSpec llm = Stage("llm", "sim_llm", kParams, 2, true, "tokens");
  llm.failover_max_attempts = 3;
  llm.worker_flags = std::move(flags);
  llm.replica_flags.resize(2);
  llm.replica_flags[kVictim] = std::move(victim_flags);
  spec.stages.push_back(llm);
  return spec;
}

std::vector<v1::GenerateRequest> Requests(const std::string& prefix, uint32_t tokens) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(SeededSimRequest(absl::StrCat(prefix, i), i, {tokens}));
  }
  return requests;
}

// The victim's engine hangs in its 100th step; its watchdog (300 ms) reports
// the stall. Keepalive and the idle timeout are too slow to matter.
TEST(PipelineFailoverHangTest, StalledReplicasRequestsAreMovedWhole) {
  const std::vector<v1::GenerateRequest> requests = Requests("stall-", 400);
  std::vector<GenerateResult> clean;
  {
    // The hang would stop a fault-free run on this pipeline: a twin without it.
    std::unique_ptr<PipelineHarness> twin = StartPipeline(LlmSpec({}, {}));
    ASSERT_NE(twin, nullptr);
    clean = FaultFreeRun(*twin, requests);
  }
  PipelineSpec spec = LlmSpec({"--stall_timeout_ms=300", "--stall_exit_ms=0"},
                              {absl::StrCat("--engine_params=", kParams, ",hang_at_step=100")});
  spec.keepalive_ms = 600000;
  spec.keepalive_timeout_ms = 600000;
  spec.request_idle_timeout_ms = 600000;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : requests) {
    calls.push_back(pipeline->StartGenerate(request, absl::Seconds(120)));
  }
  for (int i = 0; i < kRequests; ++i) ExpectSameContent(calls[i]->Wait(absl::Seconds(90)), clean[i]);
  // The stall did happen: the victim is out.
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->stages(0).replicas(kVictim).alive())
      << "the victim never stalled: " << status->stages(0).replicas(kVictim).last_error();
}

// The victim drains (SIGTERM) with a 300 ms drain timeout while it holds
// requests of seconds: what the timeout stops is moved, not failed.
TEST(PipelineFailoverHangTest, DrainTimeoutMovesTheLeftoversWhole) {
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(LlmSpec({}, {"--drain_timeout_ms=300"}));
  ASSERT_NE(pipeline, nullptr);
  const std::vector<v1::GenerateRequest> requests = Requests("drain-", 1500);
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(requests, "clean-"));
  int victims = 0;
  const std::vector<GenerateResult> results =
      RunWithFault(*pipeline, Renamed(requests, "fault-"), HasOutput, [&] {
        victims = BoundTo(*pipeline, 0, kVictim);
        pipeline->worker_process(0, kVictim)->Signal(SIGTERM);
      });
  EXPECT_GT(victims, 0) << "the drained replica held none of the requests";
  for (int i = 0; i < kRequests; ++i) ExpectSameContent(results[i], clean[i]);
  EXPECT_EQ(pipeline->worker_process(0, kVictim)->Wait(absl::Seconds(10)), 0);
}

// How one request of the abort race is treated.
enum class Stop { kNone, kAbort, kCancel };

// SimSpec's shape with the llm stage streaming from the draft (both under way
// at once) and failing over. Requests are aborted or cancelled right after the
// llm replica holding half of them is killed, while their failover runs. Each
// ends exactly once — ABORT, or whole if it ended first — and nothing is left
// running anywhere.
TEST(PipelineFailoverHangTest, AbortAndCancelRacingAFailoverEndEachRequestOnce) {
  constexpr int kLlmVictim = 1;
  PipelineSpec spec = SimSpec();
  spec.stages[1].input_mode = "streaming";
  spec.stages[1].failover_max_attempts = 3;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(SeededSimRequest(absl::StrCat("race-", i), i, {600, 600}));
  }
  const std::vector<GenerateResult> clean = FaultFreeRun(*pipeline, Renamed(requests, "clean-"));
  // Three of every four are stopped: abort, cancel, abort; the fourth runs on.
  auto stop_of = [](int i) { return i % 4 == 3 ? Stop::kNone : i % 4 == 1 ? Stop::kCancel : Stop::kAbort; };

  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : Renamed(requests, "fault-")) {
    calls.push_back(pipeline->StartGenerate(request, absl::Seconds(120)));
  }
  for (auto& call : calls) {
    ASSERT_TRUE(call->WaitForOutput(absl::Seconds(60))) << call->Snapshot().Summary();
  }
  ASSERT_GT(BoundTo(*pipeline, 1, kLlmVictim), 0);
  std::vector<std::string> to_abort;
  for (int i = 0; i < kRequests; ++i) {
    if (stop_of(i) == Stop::kAbort) to_abort.push_back(absl::StrCat("fault-", requests[i].request_id()));
  }
  // The kill is not waited for: the stops go out while the orchestrator moves
  // the victim's requests.
  pipeline->worker_process(1, kLlmVictim)->Signal(SIGKILL);
  for (int i = 0; i < kRequests; ++i) {
    if (stop_of(i) == Stop::kCancel) calls[i]->Cancel();
  }
  std::map<std::string, v1::AbortResult::Outcome> outcomes;
  // A stage that could not confirm leaves the request running (OUTCOME_FAILED):
  // a client asks again.
  for (int attempt = 0; attempt < 20 && !to_abort.empty(); ++attempt) {
    absl::StatusOr<v1::AbortResponse> aborted = pipeline->Abort(to_abort);
    ASSERT_TRUE(aborted.ok()) << aborted.status();
    std::vector<std::string> again;
    for (const v1::AbortResult& result : aborted->results()) {
      outcomes[result.request_id()] = result.outcome();
      if (result.outcome() == v1::AbortResult::OUTCOME_FAILED) again.push_back(result.request_id());
    }
    to_abort = again;
    if (!to_abort.empty()) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(to_abort.empty()) << to_abort.size() << " aborts never confirmed";
  pipeline->KillWorker(1, kLlmVictim);  // Reaps it.

  for (int i = 0; i < kRequests; ++i) {
    const GenerateResult r = calls[i]->Wait(absl::Seconds(60));
    SCOPED_TRACE(r.Summary());
    ASSERT_TRUE(r.done) << "hangs";
    EXPECT_EQ(r.responses_after_terminal, 0);
    const bool whole = r.status.ok() && r.terminals == 1 &&
                       r.terminal.finish_reason() != v1::FINISH_REASON_ABORT;
    switch (stop_of(i)) {
      case Stop::kNone:
        ExpectSameContent(r, clean[i]);
        break;
      case Stop::kCancel:
        // Cancelled (the client sees its own CANCELLED, no terminal) or ended first.
        if (whole) {
          ExpectSameContent(r, clean[i]);
        } else {
          EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
          EXPECT_LE(r.terminals, 1);
        }
        break;
      case Stop::kAbort: {
        ExpectOneTerminal(r);
        const auto outcome = outcomes.find(r.request_id);
        ASSERT_NE(outcome, outcomes.end());
        if (outcome->second == v1::AbortResult::OUTCOME_ABORTED) {
          EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT);
        } else {
          EXPECT_EQ(outcome->second, v1::AbortResult::OUTCOME_NOT_FOUND);
          ExpectSameContent(r, clean[i]);
        }
        break;
      }
    }
  }
  // Nothing runs for any of them on any worker (the victim back, to be asked).
  ASSERT_TRUE(pipeline->RestartWorker(1, kLlmVictim).ok());
  ASSERT_TRUE(pipeline->WaitAllAlive(absl::Seconds(20)).ok());
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

}  // namespace
}  // namespace omnistage
