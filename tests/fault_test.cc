// Failures of the whole system as processes: a replica killed with SIGKILL
// under load fails exactly its own requests (and their work on the other stages
// stops), requests arriving as it dies go to the live replicas, a restarted
// replica is re-admitted as a new instance, and an orchestrator stopped with
// SIGTERM leaves its workers serving. See
// pipeline_test.cc for the normal paths.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"
#include "stage_worker/testing/worker_test_client.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// ---- c. A replica killed under load -------------------------------------------------

std::vector<v1::GenerateRequest> SimRequests(const std::string& prefix, int n) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(MakeRequest(absl::StrCat(prefix, i), absl::StrCat("prompt number ", i),
                                   {StageParams(0, 20), StageParams(1, 200)}));
  }
  return requests;
}

TEST(PipelineFaultTest, KilledReplicaFailsOnlyItsOwnRequests) {
  constexpr int kRequests = 32;
  constexpr int kVictim = 1;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(SimSpec());
  ASSERT_NE(pipeline, nullptr);

  std::vector<GenerateResult> clean = pipeline->GenerateAll(SimRequests("clean-", kRequests));
  for (const GenerateResult& r : clean) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
    EXPECT_EQ(r.tokens.size(), 200u) << r.Summary();
  }

  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : SimRequests("fault-", kRequests)) {
    calls.push_back(pipeline->StartGenerate(request));
  }
  // Kill once every request is generating on stage 1 (200 steps of >= 5 ms each).
  for (auto& call : calls) {
    ASSERT_TRUE(call->WaitForOutput(absl::Seconds(30))) << call->Snapshot().Summary();
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  const int bound_to_victim = BoundRequests(*status, 1, kVictim);
  pipeline->KillWorker(1, kVictim);

  int failed = 0;
  int succeeded = 0;
  for (int i = 0; i < kRequests; ++i) {
    GenerateResult r = calls[i]->Wait(absl::Seconds(45));
    ExpectOneTerminal(r);
    if (r.terminal.finish_reason() == v1::FINISH_REASON_ERROR) {
      ++failed;
      const v1::Error& error = r.terminal.error();
      EXPECT_EQ(error.stage_id(), 1) << r.Summary();
      EXPECT_EQ(error.replica(), kVictim) << r.Summary();
      EXPECT_TRUE(absl::StrContains(error.message(), "stage 1")) << r.Summary();
      EXPECT_TRUE(absl::StrContains(error.message(), absl::StrCat("replica ", kVictim)))
          << r.Summary();
      EXPECT_TRUE(absl::StrContains(error.message(), "died")) << r.Summary();
    } else {
      ++succeeded;
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
      EXPECT_EQ(r.tokens, clean[i].tokens) << "request " << i << " changed: " << r.Summary();
    }
  }
  EXPECT_GE(failed, 1);
  EXPECT_GE(succeeded, 1);
  // Exactly the requests that lived on the victim failed.
  EXPECT_EQ(failed, bound_to_victim);
  // The victim is down; the rest of the pipeline holds nothing.
  absl::StatusOr<v1::PipelineStatus> after = pipeline->Status();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->stages(1).replicas(kVictim).alive());
  EXPECT_EQ(after->in_flight_requests(), 0);
  EXPECT_EQ(TotalBound(*after), 0);
  std::vector<absl::StatusOr<WorkerStats>> survivors = pipeline->Stats(1);
  ASSERT_TRUE(survivors[1 - kVictim].ok()) << survivors[1 - kVictim].status();
  EXPECT_EQ(survivors[1 - kVictim]->running + survivors[1 - kVictim]->waiting, 0);
}

// The kill race: for a few milliseconds after a replica dies, before its end is
// processed, new requests can still be routed to it. A send that finds its session
// closed evicts the replica and picks a live one, so requests arriving then do not
// fail — at the first stage nor at a later one — and the errors of the requests
// that did live on it name the replica and its instance.
TEST(PipelineFaultTest, RequestsArrivingAsReplicasDieGoToTheLiveOnes) {
  PipelineSpec spec;
  spec.name = "race";
  spec.stages.push_back(Stage("first", "sim_llm", "batch_size=256", 2, false, "tokens"));
  spec.stages.push_back(Stage("second", "sim_llm", "batch_size=256", 2, true, "tokens"));
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);

  constexpr int kClients = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  absl::Mutex mu;
  std::vector<GenerateResult> results;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        GenerateResult r = pipeline->Generate(MakeRequest(
            absl::StrCat("c", c, "-", i), "short", {StageParams(0, 2), StageParams(1, 2)}));
        ++sent;
        absl::MutexLock lock(&mu);
        results.push_back(std::move(r));
      }
    });
  }
  // The window is milliseconds wide: several rounds, so that a regression shows
  // in almost every run (one round catches it about one time in three).
  constexpr int kRounds = 5;
  std::vector<std::vector<std::string>> instances(2);  // Each victim's incarnations.
  for (int round = 0; round < kRounds; ++round) {
    absl::SleepFor(absl::Milliseconds(300));
    for (int stage : {0, 1}) {
      instances[stage].push_back(pipeline->worker_instance(stage, 1));
      pipeline->KillWorker(stage, 1);
    }
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(pipeline->RestartWorker(0, 1).ok());
    ASSERT_TRUE(pipeline->RestartWorker(1, 1).ok());
    ASSERT_TRUE(pipeline->WaitAllAlive(absl::Seconds(20)).ok());
  }
  stop = true;
  for (std::thread& t : clients) t.join();

  int died = 0;
  for (const GenerateResult& r : results) {
    // Each stage kept a live replica: no call may fail for want of one.
    ASSERT_TRUE(r.status.ok()) << r.Summary();
    ExpectOneTerminal(r);
    if (r.terminal.finish_reason() != v1::FINISH_REASON_ERROR) {
      EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
      continue;
    }
    ++died;
    const v1::Error& error = r.terminal.error();
    EXPECT_EQ(error.replica(), 1) << r.Summary();
    ASSERT_TRUE(error.stage_id() == 0 || error.stage_id() == 1) << r.Summary();
    const std::vector<std::string>& victims = instances[error.stage_id()];
    EXPECT_NE(std::find(victims.begin(), victims.end(), error.instance_id()), victims.end())
        << r.Summary();
    EXPECT_TRUE(absl::StrContains(error.message(), "died")) << r.Summary();
  }
  EXPECT_GT(sent, 4 * kClients) << "the load never got going";
  // Requests that lived on the victims may fail; few do with 2-step requests.
  EXPECT_LE(died, 2 * kClients * kRounds);
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

TEST(PipelineFaultTest, KilledTalkerAbortsItsRequestsOnTheOtherStages) {
  constexpr int kVictim = 0;
  std::unique_ptr<PipelineHarness> pipeline =
      StartPipeline(OmniSpec(/*thinker_step_us=*/10000, "streaming", "ms_per_code=5"));
  ASSERT_NE(pipeline, nullptr);
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(absl::StrCat("talk-", i));
    calls.push_back(pipeline->StartGenerate(LongOmniRequest(ids.back(), absl::StrCat("tale ", i))));
  }
  // Audio has arrived for each: each is on all three stages.
  for (auto& call : calls) {
    ASSERT_TRUE(call->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); },
                                absl::Seconds(20)))
        << call->Snapshot().Summary();
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok());
  const int on_victim = BoundRequests(*status, 1, kVictim);
  ASSERT_EQ(on_victim, 2) << "round-robin should split 4 requests 2/2";
  absl::StatusOr<std::vector<std::vector<WorkerStats>>> before = pipeline->AllStats();
  ASSERT_TRUE(before.ok()) << before.status();

  pipeline->KillWorker(1, kVictim);
  ASSERT_TRUE(Eventually(
      [&] {
        return std::count_if(calls.begin(), calls.end(),
                             [](auto& c) { return c->Snapshot().done; }) >= on_victim;
      },
      absl::Seconds(10)));
  std::vector<std::string> survivors;
  for (size_t i = 0; i < calls.size(); ++i) {
    GenerateResult r = calls[i]->Snapshot();
    if (!r.done) {
      survivors.push_back(ids[i]);
      continue;
    }
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << r.Summary();
    EXPECT_EQ(r.terminal.error().stage_id(), 1) << r.Summary();
    EXPECT_EQ(r.terminal.error().replica(), kVictim) << r.Summary();
    EXPECT_TRUE(absl::StrContains(r.terminal.error().message(), "stage 1 (talker) replica 0 died"))
        << r.Summary();
  }
  ASSERT_EQ(survivors.size(), 2u);

  // The failed requests' work on the thinker and the vocoder stops (one worker
  // Abort each, for both requests); the survivors keep running there.
  std::string why;
  EXPECT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> now = pipeline->Status();
        if (!now.ok()) {
          why = std::string(now.status().message());
          return false;
        }
        auto held = [](const absl::StatusOr<WorkerStats>& w) { return w->running + w->waiting; };
        std::vector<absl::StatusOr<WorkerStats>> thinker = pipeline->Stats(0);
        std::vector<absl::StatusOr<WorkerStats>> vocoder = pipeline->Stats(2);
        if (!thinker[0].ok() || !vocoder[0].ok()) {
          why = "no stats";
          return false;
        }
        why =
            absl::StrCat("thinker holds ", held(thinker[0]), ", vocoder holds ", held(vocoder[0]),
                         ", in flight ", now->in_flight_requests(), ", thinker bound ",
                         BoundRequests(*now, 0, 0), ", vocoder bound ", BoundRequests(*now, 2, 0));
        return held(thinker[0]) == 2 && held(vocoder[0]) == 2 && now->in_flight_requests() == 2 &&
               BoundRequests(*now, 0, 0) == 2 && BoundRequests(*now, 2, 0) == 2;
      },
      absl::Seconds(5)))
      << why;
  // The victim is down, so per stage.
  absl::StatusOr<WorkerStats> thinker = pipeline->Stats(0)[0];
  absl::StatusOr<WorkerStats> other_talker = pipeline->Stats(1)[1 - kVictim];
  absl::StatusOr<WorkerStats> vocoder = pipeline->Stats(2)[0];
  ASSERT_TRUE(thinker.ok() && other_talker.ok() && vocoder.ok());
  EXPECT_EQ(thinker->abort_calls - (*before)[0][0].abort_calls, 1) << "thinker";
  EXPECT_EQ(vocoder->abort_calls - (*before)[2][0].abort_calls, 1) << "vocoder";
  EXPECT_EQ(other_talker->abort_calls - (*before)[1][1 - kVictim].abort_calls, 0)
      << "the other talker";

  // The survivors were untouched: they are still streaming and can be aborted.
  absl::StatusOr<v1::AbortResponse> aborted = pipeline->Abort(survivors);
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  for (const v1::AbortResult& result : aborted->results()) {
    EXPECT_EQ(result.outcome(), v1::AbortResult::OUTCOME_ABORTED) << result.request_id();
  }
  for (auto& call : calls) ExpectOneTerminal(call->Wait(absl::Seconds(10)));
}

// ---- e. A restarted replica comes back -------------------------------------------------

TEST(PipelineFaultTest, RestartedReplicaIsReadmittedAsANewInstance) {
  constexpr int kVictim = 1;
  PipelineSpec spec;
  spec.name = "restart";
  spec.stages.push_back(
      Stage("llm", "sim_llm", "batch_size=64,step_time_us=1000", 2, true, "tokens"));
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  auto requests = [](const std::string& prefix, int n) {
    std::vector<v1::GenerateRequest> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(
          MakeRequest(absl::StrCat(prefix, i), absl::StrCat("question ", i), {StageParams(0, 50)}));
    }
    return out;
  };
  std::vector<GenerateResult> baseline = pipeline->GenerateAll(requests("base-", 4));
  for (const GenerateResult& r : baseline) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.tokens.size(), 50u) << r.Summary();
  }
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok());
  const std::string old_instance = status->stages(0).replicas(kVictim).instance_id();
  EXPECT_EQ(old_instance, pipeline->worker_instance(0, kVictim));

  pipeline->KillWorker(0, kVictim);
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> s = pipeline->Status();
        return s.ok() && !s->stages(0).replicas(kVictim).alive();
      },
      absl::Seconds(10)));
  // While it is down, new requests go to the live replica only.
  for (const GenerateResult& r : pipeline->GenerateAll(requests("down-", 2))) {
    ExpectOneTerminal(r);
    EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  }

  ASSERT_TRUE(pipeline->RestartWorker(0, kVictim).ok());
  const std::string new_instance = pipeline->worker_instance(0, kVictim);
  EXPECT_NE(new_instance, old_instance);
  std::string seen;
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> s = pipeline->Status();
        if (!s.ok()) return false;
        const v1::ReplicaStatus& replica = s->stages(0).replicas(kVictim);
        seen = absl::StrCat("alive=", replica.alive(), " instance=", replica.instance_id(),
                            " last_error=", replica.last_error());
        return replica.alive() && replica.instance_id() == new_instance;
      },
      absl::Seconds(10)))
      << seen;

  std::vector<absl::StatusOr<WorkerStats>> before = pipeline->Stats(0);
  ASSERT_TRUE(before[kVictim].ok()) << before[kVictim].status();
  std::vector<GenerateResult> again = pipeline->GenerateAll(requests("again-", 4));
  for (size_t i = 0; i < again.size(); ++i) {
    ExpectOneTerminal(again[i]);
    EXPECT_EQ(again[i].terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << again[i].Summary();
    EXPECT_EQ(again[i].tokens, baseline[i].tokens) << "request " << i;
  }
  std::vector<absl::StatusOr<WorkerStats>> after = pipeline->Stats(0);
  ASSERT_TRUE(after[kVictim].ok()) << after[kVictim].status();
  EXPECT_GT(after[kVictim]->steps, before[kVictim]->steps)
      << "no request was routed to the restarted replica";
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(5));
}

// ---- f. SIGTERM ------------------------------------------------------------------------

TEST(PipelineFaultTest, OrchestratorSigtermWhileIdleLeavesWorkersServing) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(SimSpec());
  ASSERT_NE(pipeline, nullptr);
  const v1::GenerateRequest request =
      MakeRequest("before", "hello", {StageParams(0, 5), StageParams(1, 10)});
  GenerateResult before = pipeline->Generate(request);
  ExpectOneTerminal(before);
  ASSERT_EQ(before.tokens.size(), 10u) << before.Summary();

  const absl::Time signalled = absl::Now();
  pipeline->orchestrator()->Signal(SIGTERM);
  EXPECT_EQ(pipeline->orchestrator()->Wait(absl::Seconds(10)), 0);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(5)) << "an idle drain should be prompt";

  for (int s = 0; s < 2; ++s) {
    for (int r = 0; r < pipeline->replicas(s); ++r) {
      SCOPED_TRACE(absl::StrCat("stage ", s, " replica ", r));
      // Still running, serving, and taking new sessions.
      EXPECT_FALSE(pipeline->worker_process(s, r)->Wait(absl::ZeroDuration()).has_value());
      auto channel =
          grpc::CreateChannel(pipeline->worker_address(s, r), grpc::InsecureChannelCredentials());
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      grpc::health::v1::HealthCheckResponse health;
      ASSERT_TRUE(grpc::health::v1::Health::NewStub(channel)->Check(&context, {}, &health).ok());
      EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);
      WorkerTestClient client(channel);
      absl::StatusOr<v1::Ready> ready = client.Connect();
      ASSERT_TRUE(ready.ok()) << ready.status();
      client.Add("direct", "ping", 3);
      std::vector<v1::RequestOutput> outputs =
          client.CollectUntilFinished("direct", absl::Seconds(10));
      ASSERT_FALSE(outputs.empty()) << "the worker did not finish a direct request";
      EXPECT_TRUE(outputs.back().finished());
      client.CloseWrites();
    }
  }

  // A new orchestrator on the same workers serves the same answer.
  ASSERT_TRUE(pipeline->StartOrchestrator().ok());
  GenerateResult again = pipeline->Generate(request);
  ExpectOneTerminal(again);
  EXPECT_EQ(again.tokens, before.tokens);
}

}  // namespace
}  // namespace omnistage
