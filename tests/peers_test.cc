// Several orchestrators sharing the same workers, as real processes:
// - an Abort sent to any orchestrator stops the request on every stage, with
//   one terminal, and at most one forwarded call per peer;
// - a worker's death fails, on each orchestrator, only its requests there;
// - an orchestrator killed with -9 loses only its own streams; the workers drop
//   its session's work within a second; the others see nothing, and an Abort
//   of its ids elsewhere fails (retryable), never NOT_FOUND;
// - a cluster status lists every orchestrator and each worker's load;
// - pick: least_loaded sees the other orchestrators' work on a worker;
// - only holders of the peers' CA's certificate reach the peer port.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/grpc/testing/test_pki.h"
#include "common/grpc/tls.h"
#include "gtest/gtest.h"
#include "protos/orchestrator_peer.grpc.pb.h"
#include "tests/metrics_scrape.h"
#include "tests/orchestrator_cluster.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr auto kAborted = v1::AbortResult::OUTCOME_ABORTED;
constexpr auto kNotFound = v1::AbortResult::OUTCOME_NOT_FOUND;
constexpr auto kFailed = v1::AbortResult::OUTCOME_FAILED;

std::unique_ptr<OrchestratorCluster> StartCluster(PipelineSpec spec, int orchestrators,
                                                  std::vector<std::string> flags = {}) {
  absl::StatusOr<std::unique_ptr<OrchestratorCluster>> cluster =
      OrchestratorCluster::Start(std::move(spec), orchestrators, std::move(flags));
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// omnistage_peer_calls_total{call="abort",...} summed over codes.
int PeerAbortCalls(int metrics_port) {
  int total = 0;
  for (absl::string_view line : absl::StrSplit(Scrape(metrics_port), '\n')) {
    if (!absl::StartsWith(line, "omnistage_peer_calls_total{call=\"abort\"")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) total += value;
  }
  return total;
}

// A long request's generated id, once it produced output.
std::string StartedId(GenerateCall& call) {
  EXPECT_TRUE(call.WaitForOutput(absl::Seconds(30)));
  return call.Snapshot().request_id;
}

void ExpectAbortedWithOneTerminal(GenerateCall& call) {
  GenerateResult result = call.Wait(absl::Seconds(20));
  ExpectOneTerminal(result);
  EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_REASON_ABORT) << result.Summary();
}

// One sim_llm stage of two replicas with long requests.
PipelineSpec OneStage() {
  PipelineSpec spec;
  spec.name = "peers";
  spec.stages.push_back(
      Stage("llm", "sim_llm", "batch_size=64,step_time_us=5000", 2, true, "tokens"));
  return spec;
}

v1::GenerateRequest Long(const std::string& id = "") {
  return MakeRequest(id, "keep going", {StageParams(0, 100000)});
}

// Requests the engine of replica r of stage 0 holds (running or waiting).
std::vector<int64_t> EngineHeld(PipelineHarness& pipeline) {
  std::vector<int64_t> held;
  for (const absl::StatusOr<WorkerStats>& stats : pipeline.Stats(0)) {
    held.push_back(stats.ok() ? stats->running + stats->waiting : -1);
  }
  return held;
}

TEST(PipelinePeersTest, AbortViaAnyOrchestratorStopsEveryStageWithOneCallPerPeer) {
  std::unique_ptr<OrchestratorCluster> cluster = StartCluster(OmniSpec(2000), 3);
  ASSERT_NE(cluster, nullptr);
  // The three orchestrators' node ids differ, and tag their generated ids.
  EXPECT_NE(cluster->node_id(0), cluster->node_id(1));
  EXPECT_NE(cluster->node_id(1), cluster->node_id(2));
  std::unique_ptr<GenerateCall> on0 = cluster->StartGenerate(0, LongOmniRequest("", "one"));
  std::unique_ptr<GenerateCall> chosen_on2 =
      cluster->StartGenerate(2, LongOmniRequest("chosen-on-2", "two"));
  const std::string id0 = StartedId(*on0);
  ASSERT_TRUE(absl::EndsWith(id0, "." + cluster->node_id(0))) << id0;
  // Audio: the request lives on every stage.
  ASSERT_TRUE(on0->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); },
                             absl::Seconds(30)));
  ASSERT_TRUE(chosen_on2->WaitUntil([](const GenerateResult& r) { return !r.audio.empty(); },
                                    absl::Seconds(30)));

  // Through orchestrator 1, which holds neither: one call to each peer.
  const int calls_before = PeerAbortCalls(cluster->metrics_port(1));
  absl::StatusOr<v1::AbortResponse> aborted =
      cluster->Abort(1, {id0, "chosen-on-2", "never-was", id0});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  ASSERT_EQ(aborted->results_size(), 4);
  EXPECT_EQ(aborted->results(0).outcome(), kAborted) << aborted->DebugString();
  EXPECT_EQ(aborted->results(1).outcome(), kAborted) << aborted->DebugString();
  EXPECT_EQ(aborted->results(2).outcome(), kNotFound) << aborted->DebugString();
  EXPECT_EQ(aborted->results(3).outcome(), kAborted) << aborted->DebugString();
  EXPECT_EQ(PeerAbortCalls(cluster->metrics_port(1)) - calls_before, 2);
  ExpectAbortedWithOneTerminal(*on0);
  ExpectAbortedWithOneTerminal(*chosen_on2);
  // Stopped on every stage: no engine holds anything.
  ExpectPipelineBecomesIdle(cluster->pipeline(), absl::Seconds(5));

  // A generated id costs one call, to its owner only.
  std::unique_ptr<GenerateCall> again = cluster->StartGenerate(0, LongOmniRequest("", "three"));
  const std::string id = StartedId(*again);
  const int before2 = PeerAbortCalls(cluster->metrics_port(2));
  aborted = cluster->Abort(2, {id});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(aborted->results(0).outcome(), kAborted);
  EXPECT_EQ(PeerAbortCalls(cluster->metrics_port(2)) - before2, 1);
  ExpectAbortedWithOneTerminal(*again);
  // A client-chosen id of the same name as another orchestrator's is that
  // orchestrator's: ids are unique per orchestrator.
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::PipelineStatus> status = cluster->Status(i);
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->in_flight_requests(), 0);
    EXPECT_EQ(status->node_id(), cluster->node_id(i));
  }
}

TEST(PipelinePeersTest, KilledOrchestratorLosesOnlyItsOwnStreams) {
  std::unique_ptr<OrchestratorCluster> cluster = StartCluster(OneStage(), 3);
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<std::unique_ptr<GenerateCall>>> calls(3);
  std::vector<std::vector<std::string>> ids(3);
  for (int o = 0; o < 3; ++o) {
    for (int n = 0; n < 4; ++n) calls[o].push_back(cluster->StartGenerate(o, Long()));
  }
  for (int o = 0; o < 3; ++o) {
    for (auto& call : calls[o]) ids[o].push_back(StartedId(*call));
  }

  // The cluster status, from any of them: every orchestrator, and the workers'
  // load (all twelve requests between the two replicas).
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = cluster->Status(1, /*cluster=*/true);
        if (!status.ok() || !status->cluster() || status->orchestrators_size() != 3) return false;
        for (const v1::OrchestratorStatus& o : status->orchestrators()) {
          if (!o.reachable() || o.in_flight_requests() != 4) return false;
        }
        int load = 0;
        for (const v1::ReplicaStatus& r : status->stages(0).replicas()) load += r.load_requests();
        return load == 12;
      },
      absl::Seconds(10)))
      << cluster->Status(1, true)->DebugString();

  const absl::Time killed = absl::Now();
  cluster->Kill(2);
  // Its workers drop its session's work within a second: each engine holds
  // exactly what the two others bound to it.
  bool dropped = Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> s0 = cluster->Status(0), s1 = cluster->Status(1);
        if (!s0.ok() || !s1.ok()) return false;
        std::vector<int64_t> held = EngineHeld(cluster->pipeline());
        for (int r = 0; r < 2; ++r) {
          if (held[r] != BoundRequests(*s0, 0, r) + BoundRequests(*s1, 0, r)) return false;
        }
        return true;
      },
      absl::Seconds(1), absl::Milliseconds(5));
  EXPECT_TRUE(dropped) << "after " << absl::Now() - killed;
  // Its clients see their streams break.
  for (auto& call : calls[2]) {
    GenerateResult result = call->Wait(absl::Seconds(10));
    EXPECT_FALSE(result.status.ok()) << result.Summary();
    EXPECT_EQ(result.terminals, 0) << result.Summary();
  }
  // The others' streams go on.
  for (int o = 0; o < 2; ++o) {
    for (auto& call : calls[o]) {
      const int before = call->Snapshot().output_chunks;
      EXPECT_TRUE(call->WaitUntil(
          [before](const GenerateResult& r) { return r.output_chunks > before; },
          absl::Seconds(10)));
      EXPECT_FALSE(call->Snapshot().done);
    }
  }
  // Its ids, aborted elsewhere: FAILED (it may still hold them), never NOT_FOUND.
  absl::StatusOr<v1::AbortResponse> lost = cluster->Abort(0, {ids[2][0], ids[1][0]});
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->results(0).outcome(), kFailed) << lost->DebugString();
  EXPECT_EQ(lost->results(0).error().code(), 14) << lost->DebugString();
  EXPECT_EQ(lost->results(1).outcome(), kAborted) << lost->DebugString();
  // The cluster status shows it unreachable.
  absl::StatusOr<v1::PipelineStatus> status = cluster->Status(0, /*cluster=*/true);
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->orchestrators_size(), 3);
  int unreachable = 0;
  for (const v1::OrchestratorStatus& o : status->orchestrators()) unreachable += !o.reachable();
  EXPECT_EQ(unreachable, 1) << status->DebugString();
  // The survivors' requests end as their clients ask, through either.
  std::vector<std::string> rest = {ids[0].begin(), ids[0].end()};
  rest.insert(rest.end(), ids[1].begin() + 1, ids[1].end());
  absl::StatusOr<v1::AbortResponse> aborted = cluster->Abort(1, rest);
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  for (const v1::AbortResult& result : aborted->results()) {
    EXPECT_EQ(result.outcome(), kAborted) << aborted->DebugString();
  }
  for (int o = 0; o < 2; ++o) {
    for (auto& call : calls[o]) ExpectAbortedWithOneTerminal(*call);
  }
  // Nothing else changed for them: every replica alive.
  for (int o = 0; o < 2; ++o) {
    absl::StatusOr<v1::PipelineStatus> s = cluster->Status(o);
    ASSERT_TRUE(s.ok());
    for (const v1::ReplicaStatus& r : s->stages(0).replicas()) EXPECT_TRUE(r.alive());
    EXPECT_EQ(s->in_flight_requests(), 0);
  }
  ExpectPipelineBecomesIdle(cluster->pipeline(), absl::Seconds(5));
}

TEST(PipelinePeersTest, AWorkersDeathFailsEachOrchestratorsOwnRequestsOnItOnly) {
  std::unique_ptr<OrchestratorCluster> cluster = StartCluster(OneStage(), 3);
  ASSERT_NE(cluster, nullptr);
  // Each orchestrator puts one request on each replica (round robin).
  std::vector<std::vector<std::unique_ptr<GenerateCall>>> calls(3);
  for (int o = 0; o < 3; ++o) {
    for (int n = 0; n < 2; ++n) {
      calls[o].push_back(cluster->StartGenerate(o, Long()));
      ASSERT_TRUE(calls[o].back()->WaitForOutput(absl::Seconds(30)));
    }
  }
  std::vector<std::vector<int>> bound(3);
  for (int o = 0; o < 3; ++o) {
    absl::StatusOr<v1::PipelineStatus> status = cluster->Status(o);
    ASSERT_TRUE(status.ok());
    bound[o] = {BoundRequests(*status, 0, 0), BoundRequests(*status, 0, 1)};
    ASSERT_EQ(bound[o][0], 1) << status->DebugString();
  }
  cluster->pipeline().KillWorker(0, 0);
  // Every orchestrator fails its one request there, naming the replica; the
  // one on replica 1 goes on.
  for (int o = 0; o < 3; ++o) {
    ASSERT_TRUE(Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = cluster->Status(o);
          return status.ok() && status->in_flight_requests() == 1;
        },
        absl::Seconds(10)))
        << "orchestrator " << o;
    int failed = 0, running = 0;
    for (auto& call : calls[o]) {
      if (!call->WaitUntil([](const GenerateResult& r) { return r.done; }, absl::Seconds(1))) {
        ++running;
        continue;
      }
      GenerateResult result = call->Wait(absl::Seconds(5));
      ExpectOneTerminal(result);
      EXPECT_EQ(result.terminal.finish_reason(), v1::FINISH_REASON_ERROR) << result.Summary();
      EXPECT_EQ(result.terminal.error().replica(), 0) << result.Summary();
      ++failed;
    }
    EXPECT_EQ(failed, 1) << "orchestrator " << o;
    EXPECT_EQ(running, 1) << "orchestrator " << o;
  }
  for (int o = 0; o < 3; ++o) {
    for (auto& call : calls[o]) call->Cancel();
  }
}

TEST(PipelinePeersTest, LeastLoadedSeesTheOtherOrchestratorsWork) {
  PipelineSpec spec = OneStage();
  spec.stages[0].pick = "least_loaded";
  std::unique_ptr<OrchestratorCluster> cluster = StartCluster(spec, 2);
  ASSERT_NE(cluster, nullptr);
  // Orchestrator 0 puts two requests on replica 0 and one on replica 1.
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (int n = 0; n < 3; ++n) {
    calls.push_back(cluster->StartGenerate(0, Long()));
    ASSERT_TRUE(calls.back()->WaitForOutput(absl::Seconds(30)));
  }
  absl::StatusOr<v1::PipelineStatus> s0 = cluster->Status(0);
  ASSERT_TRUE(s0.ok());
  const int busier = BoundRequests(*s0, 0, 0) > BoundRequests(*s0, 0, 1) ? 0 : 1;
  ASSERT_EQ(BoundRequests(*s0, 0, busier), 2) << s0->DebugString();
  // Orchestrator 1 hears it from the workers...
  ASSERT_TRUE(Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> s1 = cluster->Status(1);
        return s1.ok() && s1->stages(0).replicas(busier).load_requests() == 2 &&
               s1->stages(0).replicas(1 - busier).load_requests() == 1;
      },
      absl::Seconds(10)));
  // ...and sends its own request to the other one (its round robin would
  // start at replica 0 either way).
  calls.push_back(cluster->StartGenerate(1, Long()));
  ASSERT_TRUE(calls.back()->WaitForOutput(absl::Seconds(30)));
  absl::StatusOr<v1::PipelineStatus> s1 = cluster->Status(1);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(BoundRequests(*s1, 0, 1 - busier), 1) << s1->DebugString();
  for (auto& call : calls) call->Cancel();
  ExpectPipelineBecomesIdle(cluster->pipeline(), absl::Seconds(10));
}

TEST(PipelinePeersTest, OnlyPeersWithTheCasCertificateReachThePeerPort) {
  TestPki pki(TestDirectory());
  const TlsFiles peer = pki.Issue("peer", {});
  std::unique_ptr<OrchestratorCluster> cluster =
      StartCluster(OneStage(), 2,
                   {"--peer_tls_cert=" + peer.cert, "--peer_tls_key=" + peer.key,
                    "--peer_tls_ca=" + peer.ca});
  ASSERT_NE(cluster, nullptr);  // Up means each reached the other over mutual TLS.
  std::unique_ptr<GenerateCall> call = cluster->StartGenerate(0, Long());
  const std::string id = StartedId(*call);

  // Someone else on the network: no certificate, or one from another CA.
  const std::string other_dir = TestDirectory() + "/other";
  std::filesystem::create_directories(other_dir);
  TestPki other(other_dir, "other-ca");
  const TlsFiles stranger = other.Issue("stranger", {});
  for (const TlsFiles& tls :
       {TlsFiles{"", "", peer.ca}, TlsFiles{stranger.cert, stranger.key, peer.ca}}) {
    auto stub = v1::OrchestratorPeer::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", cluster->peer_port(0)), ChannelCredentialsFor(tls)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::PeerAbortRequest request;
    request.add_request_ids(id);
    v1::AbortResponse response;
    const grpc::Status status = stub->PeerAbort(&context, request, &response);
    EXPECT_FALSE(status.ok()) << (tls.cert.empty() ? "no certificate" : "another CA's");
  }
  EXPECT_FALSE(call->Snapshot().done) << "a stranger stopped it";
  // The peer, forwarding a client's Abort, can.
  absl::StatusOr<v1::AbortResponse> aborted = cluster->Abort(1, {id});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(aborted->results(0).outcome(), kAborted) << aborted->DebugString();
  ExpectAbortedWithOneTerminal(*call);
}

}  // namespace
}  // namespace omnistage
