// Faults that do not close a connection, and the orchestrator's own death:
// - a replica stopped with SIGSTOP (hung but connected) is declared dead by the
//   keepalive within keepalive_ms + keepalive_timeout_ms, failing only its own
//   requests; resumed, it is re-admitted;
// - with keepalive too slow to notice, request_idle_timeout_ms still fails a
//   request that produces nothing, with a clear error, rather than hang;
// - an orchestrator killed with SIGKILL leaves no work on the workers: they
//   abort the requests of its broken sessions;
// - an orchestrator stopped with SIGTERM drains: requests that finish within
//   drain_timeout_ms complete, the rest end with a terminal ABORT, exit 0.
// Every request gets exactly one terminal response and nothing is left bound.
#include <signal.h>

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_test_client.h"
#include "tests/metrics_scrape.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr int kVictim = 1;  // Replica of stage 1 ("llm") that is stopped.

// Long requests on SimSpec(): stage 1 runs `tokens` steps of >= 5 ms.
std::vector<std::unique_ptr<GenerateCall>> StartLong(PipelineHarness& pipeline,
                                                     const std::string& prefix, int n,
                                                     uint32_t tokens) {
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (int i = 0; i < n; ++i) {
    calls.push_back(pipeline.StartGenerate(MakeRequest(
        absl::StrCat(prefix, i), absl::StrCat("prompt ", i), {StageParams(0, 4),
                                                              StageParams(1, tokens)})));
  }
  for (auto& call : calls) EXPECT_TRUE(call->WaitForOutput(absl::Seconds(30)));
  return calls;
}

// How many requests the orchestrator has bound to stage 1's victim replica.
int BoundToVictim(PipelineHarness& pipeline) {
  absl::StatusOr<v1::PipelineStatus> status = pipeline.Status();
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? BoundRequests(*status, 1, kVictim) : -1;
}

// Waits for every call and sorts the results into failed (with `words` in the
// error) and completed; every stream must have ended with exactly one terminal.
void ExpectOnlyVictimsFailed(std::vector<std::unique_ptr<GenerateCall>>& calls, int victims,
                             const std::vector<std::string>& words, uint32_t tokens) {
  int failed = 0;
  int completed = 0;
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(60));
    ExpectOneTerminal(r);
    if (r.terminal.finish_reason() == v1::FINISH_REASON_ERROR) {
      ++failed;
      for (const std::string& w : words) {
        EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), w))
            << "missing '" << w << "' in: " << r.terminal.error().message();
      }
      EXPECT_EQ(r.terminal.error().stage_id(), 1) << r.Summary();
    } else {
      ++completed;
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
      EXPECT_EQ(r.tokens.size(), tokens) << r.Summary();
    }
  }
  EXPECT_EQ(failed, victims);
  EXPECT_EQ(completed, static_cast<int>(calls.size()) - victims);
}

TEST(PipelineHangTest, SigstoppedReplicaIsDeclaredDeadByKeepaliveAndReadmittedWhenResumed) {
  PipelineSpec spec = SimSpec();
  spec.keepalive_ms = 300;
  spec.keepalive_timeout_ms = 300;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  const uint32_t kTokens = 400;  // >= 2 s per request.
  std::vector<std::unique_ptr<GenerateCall>> calls = StartLong(*pipeline, "stop-", 8, kTokens);
  const int victims = BoundToVictim(*pipeline);
  ASSERT_GT(victims, 0);

  const absl::Time stopped = absl::Now();
  pipeline->worker_process(1, kVictim)->Signal(SIGSTOP);
  ExpectOnlyVictimsFailed(calls, victims, {"stage 1 (llm) replica 1", "died"}, kTokens);
  // Bounded by keepalive (0.3 + 0.3 s) plus the survivors' remaining work.
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(20));

  pipeline->worker_process(1, kVictim)->Signal(SIGCONT);
  // Resumed, it notices its broken session (dropping that work) and the
  // orchestrator's reconnect admits it again.
  ASSERT_TRUE(pipeline->WaitAllAlive(absl::Seconds(15)).ok());
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(15));
  GenerateResult after = pipeline->Generate(
      MakeRequest("after", "after", {StageParams(0, 4), StageParams(1, 20)}));
  ExpectOneTerminal(after);
  EXPECT_EQ(after.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << after.Summary();
}

TEST(PipelineHangTest, IdleTimeoutFailsRequestsOfAHungReplicaWhenKeepaliveIsSlow) {
  PipelineSpec spec = SimSpec();
  spec.keepalive_ms = 600000;  // Keepalive will not notice within the test.
  spec.keepalive_timeout_ms = 600000;
  spec.request_idle_timeout_ms = 1000;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  const uint32_t kTokens = 400;
  std::vector<std::unique_ptr<GenerateCall>> calls = StartLong(*pipeline, "hang-", 8, kTokens);
  const int victims = BoundToVictim(*pipeline);
  ASSERT_GT(victims, 0);

  const absl::Time stopped = absl::Now();
  pipeline->worker_process(1, kVictim)->Signal(SIGSTOP);
  ExpectOnlyVictimsFailed(calls, victims,
                          {"stage 1 (llm) replica 1", "produced nothing for 1s"}, kTokens);
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(20));

  // The orchestrator asked the hung replica to abort those requests; resumed, it
  // applies that and is idle again, with nothing bound anywhere.
  pipeline->worker_process(1, kVictim)->Signal(SIGCONT);
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

// One sim_llm stage of two replicas whose engines hang in their 200th step
// (2 ms steps), with the workers' stall watchdog at 300 ms; keepalive and the
// idle timeout are too slow to matter, so only the watchdog can tell.
PipelineSpec HangingSpec(int stall_exit_ms) {
  PipelineSpec spec;
  spec.name = "hanging";
  spec.keepalive_ms = 600000;
  spec.keepalive_timeout_ms = 600000;
  spec.request_idle_timeout_ms = 600000;
  StageSpec llm = Stage("llm", "sim_llm", "batch_size=64,step_time_us=2000,hang_at_step=200", 2,
                        true, "tokens");
  llm.worker_flags = {"--stall_timeout_ms=300", absl::StrCat("--stall_exit_ms=", stall_exit_ms)};
  spec.stages.push_back(llm);
  return spec;
}

// A worker whose engine hangs inside a step still answers gRPC and keepalive; its
// watchdog tells the orchestrator, which fails what it held and sends it nothing
// more, instead of letting every request routed there wait for the idle timeout
// and its bindings pile up.
TEST(PipelineHangTest, HungEngineIsReportedItsRequestsFailAndNothingMoreGoesThere) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(HangingSpec(0));
  ASSERT_NE(pipeline, nullptr);
  // The first request goes to replica 0, which alone steps, and hangs at step 200.
  const absl::Time start = absl::Now();
  GenerateResult victim =
      pipeline->Generate(MakeRequest("victim", "long", {StageParams(0, 1000)}), absl::Seconds(20));
  ExpectOneTerminal(victim);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the stall was not noticed";
  EXPECT_EQ(victim.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << victim.Summary();
  EXPECT_EQ(victim.terminal.error().replica(), 0);
  EXPECT_TRUE(absl::StrContains(victim.terminal.error().message(),
                                "stage 0 (llm) replica 0 stalled: step 200 has run for"))
      << victim.Summary();
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok());
  EXPECT_FALSE(status->stages(0).replicas(0).alive());
  EXPECT_TRUE(absl::StartsWith(status->stages(0).replicas(0).last_error(), "stalled: step 200"))
      << status->stages(0).replicas(0).last_error();

  // Everything after it goes to the working replica, and nothing stays bound.
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 10; ++i) {
    requests.push_back(MakeRequest(absl::StrCat("after-", i), "short", {StageParams(0, 5)}));
  }
  for (const GenerateResult& r : pipeline->GenerateAll(requests)) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  }
  status = pipeline->Status();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->in_flight_requests(), 0);
  EXPECT_EQ(TotalBound(*status), 0);
}

TEST(PipelineHangTest, WorkerStalledPastItsExitTimeoutExitsForItsSupervisor) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(HangingSpec(800));
  ASSERT_NE(pipeline, nullptr);
  GenerateResult victim =
      pipeline->Generate(MakeRequest("victim", "long", {StageParams(0, 1000)}), absl::Seconds(20));
  EXPECT_TRUE(absl::StrContains(victim.terminal.error().message(), "stalled")) << victim.Summary();
  // Exit code 3 soon after 800 ms from the step's start.
  EXPECT_EQ(pipeline->worker_process(0, 0)->Wait(absl::Seconds(10)), 3);
  // A supervisor starts it again: a new incarnation, admitted, serving.
  ASSERT_TRUE(pipeline->RestartWorker(0, 0).ok());
  ASSERT_TRUE(pipeline->WaitAllAlive(absl::Seconds(15)).ok());
  GenerateResult after = pipeline->Generate(MakeRequest("after", "x", {StageParams(0, 3)}));
  ExpectOneTerminal(after);
  EXPECT_EQ(after.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << after.Summary();
}

// CPU time (user + system) a process has used so far.
absl::Duration CpuTime(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may contain spaces) start after ')'.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  if (f.size() < 13) return absl::ZeroDuration();
  const double ticks = std::stod(f[11]) + std::stod(f[12]);  // utime, stime
  return absl::Seconds(ticks / sysconf(_SC_CLK_TCK));
}

TEST(PipelineHangTest, AbortStuckOnAHungReplicaDoesNotSpinTheIdleTimer) {
  PipelineSpec spec = SimSpec();
  spec.keepalive_ms = 600000;
  spec.keepalive_timeout_ms = 600000;
  spec.request_idle_timeout_ms = 300;
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::unique_ptr<GenerateCall>> calls = StartLong(*pipeline, "stuck-", 4, 2000);
  ASSERT_GT(BoundToVictim(*pipeline), 0);
  pipeline->worker_process(1, kVictim)->Signal(SIGSTOP);
  // The abort reaches the hung replica and waits there (up to its 5 s timeout)
  // while the requests' idle timers come due.
  std::thread abort([&] {
    (void)pipeline->Abort({"stuck-0", "stuck-1", "stuck-2", "stuck-3"});
  });
  // Sent there: the orchestrator counts its call to the stopped replica.
  ASSERT_GT(pipeline->orchestrator_metrics_port(), 0);
  ASSERT_TRUE(Eventually(
      [&] {
        return absl::StrContains(Scrape(pipeline->orchestrator_metrics_port()),
                                 "omnistage_worker_abort_calls_total{stage=\"llm\",replica=\"1\"} 1\n");
      },
      absl::Seconds(10), absl::Milliseconds(20)))
      << "the abort never reached the stopped replica";
  const pid_t orchestrator = pipeline->orchestrator()->pid();
  const absl::Duration before = CpuTime(orchestrator);
  absl::SleepFor(absl::Seconds(2));
  const absl::Duration used = CpuTime(orchestrator) - before;
  EXPECT_LT(used, absl::Milliseconds(500)) << "the orchestrator spun while the abort waited";
  pipeline->worker_process(1, kVictim)->Signal(SIGCONT);
  abort.join();
  for (auto& call : calls) ExpectOneTerminal(call->Wait(absl::Seconds(30)));
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

// The "stats" utility straight from a worker, on a session of our own.
absl::StatusOr<WorkerStats> DirectStats(PipelineHarness& pipeline, int stage, int replica) {
  WorkerTestClient client(grpc::CreateChannel(pipeline.worker_address(stage, replica),
                                              grpc::InsecureChannelCredentials()));
  absl::StatusOr<v1::Ready> ready = client.Connect();
  if (!ready.ok()) return ready.status();
  v1::WorkerCommand command;
  command.mutable_utility()->set_call_id(1);
  command.mutable_utility()->set_name("stats");
  client.Send(command);
  std::optional<v1::WorkerEvent> event = client.NextWhere(
      [](const v1::WorkerEvent& e) { return e.has_utility_result(); }, absl::Seconds(5));
  if (!event.has_value()) return absl::DeadlineExceededError("no stats");
  const auto& fields = event->utility_result().value().struct_value().fields();
  WorkerStats stats;
  stats.running = static_cast<int64_t>(fields.at("running").number_value());
  stats.waiting = static_cast<int64_t>(fields.at("waiting").number_value());
  return stats;
}

TEST(PipelineHangTest, KilledOrchestratorLeavesNoWorkOnTheWorkers) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(SimSpec());
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::unique_ptr<GenerateCall>> calls = StartLong(*pipeline, "orphan-", 6, 2000);
  int running = 0;
  for (int r = 0; r < pipeline->replicas(1); ++r) {
    absl::StatusOr<WorkerStats> stats = DirectStats(*pipeline, 1, r);
    ASSERT_TRUE(stats.ok()) << stats.status();
    running += static_cast<int>(stats->running);
  }
  ASSERT_EQ(running, 6);  // The work is there before the kill.

  pipeline->orchestrator()->Signal(SIGKILL);
  ASSERT_TRUE(pipeline->orchestrator()->Wait(absl::Seconds(10)).has_value());
  // Each worker sees its session break and aborts that session's requests.
  const bool idle = Eventually(
      [&] {
        for (int s = 0; s < 2; ++s) {
          for (int r = 0; r < pipeline->replicas(s); ++r) {
            absl::StatusOr<WorkerStats> stats = DirectStats(*pipeline, s, r);
            if (!stats.ok() || stats->running != 0 || stats->waiting != 0) return false;
          }
        }
        return true;
      },
      absl::Seconds(5), absl::Milliseconds(50));
  EXPECT_TRUE(idle) << "workers still run the dead orchestrator's requests";
  // The clients' streams end (with UNAVAILABLE), none hangs.
  for (auto& call : calls) {
    GenerateResult r = call->Wait(absl::Seconds(10));
    EXPECT_TRUE(r.done);
    EXPECT_FALSE(r.status.ok());
  }
}

TEST(PipelineHangTest, SigtermDrainsInFlightRequestsThenExitsZero) {
  PipelineSpec spec = SimSpec();
  spec.drain_timeout_ms = 1500;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  // ~0.5 s of work: finishes within the drain. ~10 s: does not.
  std::vector<std::unique_ptr<GenerateCall>> quick = StartLong(*pipeline, "quick-", 2, 100);
  std::vector<std::unique_ptr<GenerateCall>> slow = StartLong(*pipeline, "slow-", 2, 2000);

  const absl::Time signalled = absl::Now();
  pipeline->orchestrator()->Signal(SIGTERM);
  for (auto& call : quick) {
    GenerateResult r = call->Wait(absl::Seconds(10));
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    EXPECT_EQ(r.tokens.size(), 100u) << r.Summary();
  }
  for (auto& call : slow) {
    GenerateResult r = call->Wait(absl::Seconds(10));
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << r.Summary();
    EXPECT_LT(r.tokens.size(), 2000u) << r.Summary();
  }
  EXPECT_EQ(pipeline->orchestrator()->Wait(absl::Seconds(10)), 0);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(8));
  // The aborted requests stopped on the workers too.
  for (int r = 0; r < pipeline->replicas(1); ++r) {
    absl::StatusOr<WorkerStats> stats = DirectStats(*pipeline, 1, r);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->running + stats->waiting, 0);
  }
}

}  // namespace
}  // namespace omnistage
