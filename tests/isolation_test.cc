// A bad or unlucky request fails only itself, as real processes (the black-box
// findings of the orchestrator's reshape):
// - a request larger than a worker accepts is refused for itself; the session it
//   would have broken, and the other requests on it, go on;
// - the prompt limit and the receive limit say plainly which is which, and the
//   largest prompt the config allows does reach a worker;
// - one Abort of several requests, where one replica cannot confirm, aborts the
//   others and reports that one as FAILED (retryable), per id;
// - an Abort whose client deadline passes while a worker is stuck commits nothing
//   later: the request stays in flight and a retry ends it;
// - a client of a worker that is not the orchestrator cannot stop the
//   orchestrator's requests: session ids cannot be guessed.
#include <signal.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_test_client.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

// One sim_llm stage of two replicas, 5 ms steps.
PipelineSpec OneStage() {
  PipelineSpec spec;
  spec.name = "isolation";
  spec.stages.push_back(Stage("llm", "sim_llm", "batch_size=64,step_time_us=5000", 2, true,
                              "tokens"));
  return spec;
}

v1::GenerateRequest Long(const std::string& id) {
  return MakeRequest(id, "keep going", {StageParams(0, 100000)});
}

const v1::ReplicaStatus& Replica(const v1::PipelineStatus& status, int stage, int replica) {
  return status.stages(stage).replicas(replica);
}

// SIGSTOPs a worker and waits until the kernel shows it stopped ('T' in
// /proc/<pid>/stat), so nothing it was doing can still complete afterwards.
void StopWorker(PipelineHarness& pipeline, int stage, int replica) {
  ChildProcess* worker = pipeline.worker_process(stage, replica);
  worker->Signal(SIGSTOP);
  const std::string path = absl::StrCat("/proc/", worker->pid(), "/stat");
  ASSERT_TRUE(Eventually(
      [&] {
        std::ifstream stat(path);
        std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const size_t paren = text.rfind(')');
        return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T';
      },
      absl::Seconds(5), absl::Milliseconds(1)))
      << "worker " << stage << "/" << replica << " did not stop";
}

TEST(PipelineIsolationTest, RequestTooLargeForTheWorkerFailsOnlyItself) {
  PipelineSpec spec = OneStage();
  spec.stages[0].replicas = 1;
  spec.stages[0].worker_flags = {"--max_message_bytes=1048576"};
  spec.max_prompt_bytes = 4 << 20;  // The orchestrator would take it...
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  absl::StatusOr<v1::PipelineStatus> before = pipeline->Status();
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(Replica(*before, 0, 0).max_message_bytes(), 1048576) << "Ready did not announce it";
  std::unique_ptr<GenerateCall> neighbour = pipeline->StartGenerate(Long("neighbour"));
  ASSERT_TRUE(neighbour->WaitForOutput(absl::Seconds(30)));

  // ...but the worker would not: refused for this request alone, unsent.
  GenerateResult big = pipeline->Generate(MakeRequest("big", std::string(3 << 20, 'p')));
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << big.Summary();
  EXPECT_TRUE(absl::StrContains(big.status.error_message(),
                                "stage 0 (llm) replica 0 could not take the request"))
      << big.Summary();
  EXPECT_TRUE(absl::StrContains(big.status.error_message(), "accepts at most 1048576"))
      << big.Summary();

  // The session it would have broken is the same one, serving the neighbour.
  absl::StatusOr<v1::PipelineStatus> after = pipeline->Status();
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(Replica(*after, 0, 0).alive());
  EXPECT_EQ(Replica(*after, 0, 0).instance_id(), Replica(*before, 0, 0).instance_id());
  EXPECT_EQ(Replica(*after, 0, 0).last_error(), "");
  const GenerateResult progress = neighbour->Snapshot();
  EXPECT_FALSE(progress.done) << progress.Summary();
  ASSERT_TRUE(pipeline->Abort({"neighbour"}).ok());
  const GenerateResult ended = neighbour->Wait(absl::Seconds(30));
  ExpectOneTerminal(ended);
  EXPECT_EQ(ended.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << ended.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

TEST(PipelineIsolationTest, PromptLimitsSayWhichLimitWasHit) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(OneStage());  // 64 KiB prompts
  ASSERT_NE(pipeline, nullptr);
  // Over limits.max_prompt_bytes but within what gRPC receives: the orchestrator's
  // INVALID_ARGUMENT, naming the limit.
  GenerateResult over = pipeline->Generate(MakeRequest("over", std::string(65537, 'p')));
  EXPECT_EQ(over.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << over.Summary();
  EXPECT_EQ(over.status.error_message(), "prompt is 65537 bytes; the limit is 65536");
  // Over the server's receive limit (max(4 MiB, max_prompt_bytes + 64 KiB)):
  // gRPC refuses the message before the orchestrator sees it.
  GenerateResult huge = pipeline->Generate(MakeRequest("huge", std::string(5 << 20, 'p')));
  EXPECT_EQ(huge.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << huge.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

// The largest prompt a config may allow reaches stage 0 and runs: the limit the
// loader enforces fits the worker's default message limit.
TEST(PipelineIsolationTest, LargestAllowedPromptRunsOnAWorkerWithDefaultLimits) {
  PipelineSpec spec = OneStage();
  spec.stages[0].replicas = 1;
  spec.max_prompt_bytes = 16711680;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  GenerateResult r = pipeline->Generate(
      MakeRequest("largest", std::string(16711680, 'p'), {StageParams(0, 8)}));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  EXPECT_EQ(r.tokens.size(), 8u) << r.Summary();
}

// One replica is stopped (SIGSTOP; keepalive too slow to notice), so its abort
// cannot be confirmed within worker_abort_timeout_ms.
PipelineSpec WithStuckReplicaSettings() {
  PipelineSpec spec = OneStage();
  spec.keepalive_ms = 600000;
  spec.keepalive_timeout_ms = 600000;
  spec.worker_abort_timeout_ms = 500;
  return spec;
}

TEST(PipelineIsolationTest, AbortOfSeveralReportsEachOutcomeWhenOneReplicaCannotConfirm) {
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(WithStuckReplicaSettings());
  ASSERT_NE(pipeline, nullptr);
  // Round robin, one after the other: healthy-0 on replica 0, stuck-1 on replica 1.
  std::unique_ptr<GenerateCall> healthy = pipeline->StartGenerate(Long("healthy-0"));
  ASSERT_TRUE(healthy->WaitForOutput(absl::Seconds(30)));
  std::unique_ptr<GenerateCall> stuck = pipeline->StartGenerate(Long("stuck-1"));
  ASSERT_TRUE(stuck->WaitForOutput(absl::Seconds(30)));
  absl::StatusOr<v1::PipelineStatus> placed = pipeline->Status();
  ASSERT_TRUE(placed.ok());
  ASSERT_EQ(BoundRequests(*placed, 0, 1), 1);
  StopWorker(*pipeline, 0, 1);

  absl::StatusOr<v1::AbortResponse> response = pipeline->Abort({"healthy-0", "stuck-1", "ghost"});
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results_size(), 3);
  EXPECT_EQ(response->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const v1::AbortResult& failed = response->results(1);
  EXPECT_EQ(failed.outcome(), v1::AbortResult::OUTCOME_FAILED);
  EXPECT_EQ(failed.error().code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(failed.error().stage_id(), 0);
  EXPECT_EQ(failed.error().replica(), 1);
  EXPECT_EQ(failed.error().instance_id(), pipeline->worker_instance(0, 1));
  EXPECT_TRUE(absl::StrContains(failed.error().message(), "stage 0 (llm) replica 1 abort failed"))
      << failed.error().message();
  EXPECT_EQ(response->results(2).outcome(), v1::AbortResult::OUTCOME_NOT_FOUND);

  const GenerateResult aborted = healthy->Wait(absl::Seconds(30));
  ExpectOneTerminal(aborted);
  EXPECT_EQ(aborted.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << aborted.Summary();
  EXPECT_FALSE(stuck->Snapshot().done) << "the unconfirmed request was ended";

  // Once the replica answers again, a retry of just that id ends it.
  pipeline->worker_process(0, 1)->Signal(SIGCONT);
  absl::StatusOr<v1::AbortResponse> retry = pipeline->Abort({"stuck-1"});
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult ended = stuck->Wait(absl::Seconds(30));
  ExpectOneTerminal(ended);
  EXPECT_EQ(ended.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << ended.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

TEST(PipelineIsolationTest, AbortPastTheClientsDeadlineNeverCommitsLater) {
  PipelineSpec spec = WithStuckReplicaSettings();
  spec.worker_abort_timeout_ms = 5000;  // The client's deadline is the sooner.
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::unique_ptr<GenerateCall> call = pipeline->StartGenerate(Long("r0"));
  ASSERT_TRUE(call->WaitForOutput(absl::Seconds(30)));
  StopWorker(*pipeline, 0, 0);

  absl::StatusOr<v1::AbortResponse> late = pipeline->Abort({"r0"}, absl::Milliseconds(300));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  // Well past the client's deadline, and while the worker is still stuck, the
  // request is still in flight: nothing was committed behind the client's back.
  absl::SleepFor(absl::Seconds(1));
  absl::StatusOr<v1::PipelineStatus> status = pipeline->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->in_flight_requests(), 1);
  EXPECT_FALSE(call->Snapshot().done);

  pipeline->worker_process(0, 0)->Signal(SIGCONT);
  absl::StatusOr<v1::AbortResponse> retry = pipeline->Abort({"r0"});
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult ended = call->Wait(absl::Seconds(30));
  ExpectOneTerminal(ended);
  EXPECT_EQ(ended.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << ended.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

TEST(PipelineIsolationTest, AnotherClientOfAWorkerCannotStopTheOrchestratorsRequests) {
  PipelineSpec spec = OneStage();
  spec.stages[0].replicas = 1;
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);
  std::unique_ptr<GenerateCall> victim = pipeline->StartGenerate(Long("victim"));
  ASSERT_TRUE(victim->WaitForOutput(absl::Seconds(30)));

  // A client that is not the orchestrator opens its own session and tries to
  // abort "victim" in the earlier ones: by number, and by its own id with the
  // number changed. Session ids carry 128 random bits: every try finds nothing.
  WorkerTestClient rogue(grpc::CreateChannel(pipeline->worker_address(0, 0),
                                             grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(rogue.Connect().ok());
  const std::string own = rogue.session_id();
  const size_t dash = own.find('-');
  ASSERT_NE(dash, std::string::npos) << own;
  uint64_t own_number = 0;
  ASSERT_TRUE(absl::SimpleAtoi(own.substr(0, dash), &own_number)) << own;
  EXPECT_GE(own.size() - dash - 1, 32u) << own;
  for (uint64_t session = 1; session < own_number; ++session) {
    for (const std::string& guess :
         {absl::StrCat(session), absl::StrCat(session, own.substr(dash))}) {
      v1::WorkerAbortRequest request;
      request.set_session_id(guess);
      request.add_request_ids("victim");
      v1::WorkerAbortResponse response;
      grpc::ClientContext context;
      grpc::Status status = rogue.stub().Abort(&context, request, &response);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << guess;
      EXPECT_EQ(status.error_message(), "unknown session '" + guess + "'");
    }
  }

  // The victim streams on, and its own client can still stop it.
  const int before = victim->Snapshot().output_chunks;
  EXPECT_TRUE(victim->WaitUntil(
      [before](const GenerateResult& r) { return r.output_chunks > before + 3; },
      absl::Seconds(10)));
  absl::StatusOr<v1::AbortResponse> aborted = pipeline->Abort({"victim"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(aborted->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult r = victim->Wait(absl::Seconds(5));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << r.Summary();
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(20));
}

}  // namespace
}  // namespace omnistage
