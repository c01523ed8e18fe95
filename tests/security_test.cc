// Security configured, as real processes: clients reach the
// orchestrator over TLS with bearer tokens, the orchestrator reaches its
// workers over mTLS. Every refusal comes with its documented status and
// affects nothing else; certificates rotate under open streams. Start-up
// refusals are in security_startup_test.cc.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/testing/health_check.h"
#include "common/grpc/testing/test_pki.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_test_client.h"
#include "tests/metrics_scrape.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789";
constexpr char kOps[] = "ops-token-0123456789";
constexpr char kGateway[] = "gateway-token-0123456789";

void WriteTokens(const std::string& path, const std::vector<std::string>& who) {
  const std::string temporary = path + ".new";
  {
    std::ofstream out(temporary);
    out << "tokens:\n";
    for (const std::string& name : who) {
      const std::string token = name == "alice"     ? kAlice
                                : name == "bob"     ? kBob
                                : name == "gateway" ? kGateway
                                                    : kOps;
      const std::string role = name == "ops" ? "admin" : name == "gateway" ? "gateway" : "user";
      out << "  - identity: " << name << "\n    role: " << role << "\n    token: \"" << token
          << "\"\n";
    }
  }
  ASSERT_EQ(std::rename(temporary.c_str(), path.c_str()), 0);
}

void Authorize(grpc::ClientContext& context, const std::string& token) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}

class SecurityProcessTest : public ::testing::Test {
 protected:
  SecurityProcessTest() : dir_(TestDirectory()), pki_(dir_), rogue_ca_(dir_, "rogue-ca") {}

  void SetUp() override {
    orchestrator_cert_ = pki_.Issue("orchestrator", {});
    worker_cert_ = pki_.Issue("worker", {});
    CertOptions client;
    client.dns_names = {"omnistage-orchestrator"};
    client.ips.clear();
    to_workers_ = pki_.Issue("to-workers", client);
    tokens_ = dir_ + "/tokens.yaml";
    WriteTokens(tokens_, {"alice", "bob", "ops", "gateway"});

    PipelineSpec spec;
    StageSpec llm = Stage("llm", "sim_llm", "step_time_us=2000", 1, true, "tokens");
    llm.worker_flags = {"--tls_cert=" + worker_cert_.cert, "--tls_key=" + worker_cert_.key,
                        "--tls_client_ca=" + pki_.ca_file()};
    spec.stages = {llm};
    spec.orchestrator_flags = {
        "--tls_cert=" + orchestrator_cert_.cert, "--tls_key=" + orchestrator_cert_.key,
        "--tokens_file=" + tokens_,              "--worker_tls_ca=" + pki_.ca_file(),
        "--worker_tls_cert=" + to_workers_.cert, "--worker_tls_key=" + to_workers_.key,
        "--health_listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0"};
    spec.client_tls = TlsFiles{"", "", pki_.ca_file()};
    spec.token = kOps;
    pipeline_ = StartPipeline(spec);
    ASSERT_NE(pipeline_, nullptr);
  }

  // `on_behalf_of`: the identity the request runs as (a gateway's token).
  std::unique_ptr<GenerateCall> Start(const std::string& id, uint32_t max_tokens,
                                      const std::string& token,
                                      const std::string& on_behalf_of = "") {
    v1::GenerateRequest request = MakeRequest(id, "hello", {StageParams(0, max_tokens)});
    request.set_on_behalf_of(on_behalf_of);
    return std::make_unique<GenerateCall>(pipeline_->stub(), std::move(request), absl::Seconds(60),
                                          token);
  }

  grpc::Status AbortAs(const std::string& token, const std::string& id,
                       v1::AbortResponse* response) {
    v1::AbortRequest request;
    request.add_request_ids(id);
    grpc::ClientContext context;
    Authorize(context, token);
    return pipeline_->stub()->Abort(&context, request, response);
  }

  grpc::Status StatusAs(const TlsFiles& tls, const std::string& token) {
    auto stub = v1::Orchestrator::NewStub(pipeline_->NewChannel(tls));
    grpc::ClientContext context;
    Authorize(context, token);
    v1::PipelineStatus status;
    return stub->GetPipelineStatus(&context, v1::PipelineStatusRequest(), &status);
  }

  const std::string dir_;
  TestPki pki_;
  TestPki rogue_ca_;
  TlsFiles orchestrator_cert_;
  TlsFiles worker_cert_;
  TlsFiles to_workers_;
  std::string tokens_;
  std::unique_ptr<PipelineHarness> pipeline_;
};

TEST_F(SecurityProcessTest, AUserGeneratesOverTlsThroughMutualTlsWorkers) {
  GenerateResult r = Start("a1", 8, kAlice)->Wait(absl::Seconds(30));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_LENGTH) << r.Summary();
  EXPECT_EQ(r.tokens.size(), 8u) << r.Summary();
}

// A front end learns whom a client's token stands for (the owner of what it
// creates); a call without a valid token is refused as every call is.
TEST_F(SecurityProcessTest, ACallerLearnsWhoItsTokenStandsFor) {
  auto caller = [&](const std::string& token, v1::CallerInfo* info) {
    grpc::ClientContext context;
    Authorize(context, token);
    return pipeline_->stub()->GetCaller(&context, v1::GetCallerRequest(), info);
  };
  v1::CallerInfo alice;
  ASSERT_TRUE(caller(kAlice, &alice).ok());
  EXPECT_EQ(alice.identity(), "alice");
  EXPECT_FALSE(alice.admin());
  EXPECT_EQ(alice.priority(), 0);
  EXPECT_EQ(alice.max_priority(), 0);
  v1::CallerInfo ops;
  ASSERT_TRUE(caller(kOps, &ops).ok());
  EXPECT_EQ(ops.identity(), "ops");
  EXPECT_TRUE(ops.admin());
  v1::CallerInfo nobody;
  EXPECT_EQ(caller("", &nobody).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(caller("not-a-token-0123456789", &nobody).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityProcessTest, EachRefusalHasItsStatusAndMessage) {
  const TlsFiles trust = pipeline_->spec().client_tls;
  EXPECT_TRUE(StatusAs(trust, kOps).ok());
  EXPECT_EQ(StatusAs(TlsFiles{}, kOps).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "plaintext against the TLS port";
  EXPECT_EQ(StatusAs(TlsFiles{"", "", rogue_ca_.ca_file()}, kOps).error_code(),
            grpc::StatusCode::UNAVAILABLE)
      << "a client that trusts another CA";

  grpc::Status missing = StatusAs(trust, "");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(missing.error_message(),
            "no bearer token: send the metadata 'authorization: Bearer <token>'");
  grpc::Status wrong = StatusAs(trust, "ops-token-0123456788");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(wrong.error_message(), "unknown or revoked token");

  grpc::Status user = StatusAs(trust, kAlice);
  EXPECT_EQ(user.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(user.error_message(),
            "GetPipelineStatus needs the admin role; 'alice' has the user role");
  v1::StageUtilityRequest utility;
  utility.set_stage_id(0);
  utility.set_name("stats");
  v1::StageUtilityResponse result;
  grpc::ClientContext context;
  Authorize(context, kAlice);
  EXPECT_EQ(pipeline_->stub()->CallStageUtility(&context, utility, &result).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  GenerateResult unauthenticated = Start("x", 4, "")->Wait(absl::Seconds(10));
  EXPECT_EQ(unauthenticated.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(unauthenticated.responses, 0);

  // None of it touched the service; operators see the refusals counted.
  ExpectOneTerminal(Start("after", 4, kBob)->Wait(absl::Seconds(30)));
  const std::string metrics = Scrape(pipeline_->orchestrator_metrics_port());
  EXPECT_THAT(metrics, HasSubstr("omnistage_auth_refusals_total{call=\"GetPipelineStatus\","
                                 "code=\"UNAUTHENTICATED\"} 2"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_auth_refusals_total{call=\"GetPipelineStatus\","
                                 "code=\"PERMISSION_DENIED\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_auth_refusals_total{call=\"CallStageUtility\","
                                 "code=\"PERMISSION_DENIED\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("omnistage_auth_refusals_total{call=\"Generate\","
                                 "code=\"UNAUTHENTICATED\"} 1"));
}

TEST_F(SecurityProcessTest, AnotherIdentitysAbortIsNotFoundAndTheOwnersWorks) {
  std::unique_ptr<GenerateCall> alices = Start("victim", 100000, kAlice);
  ASSERT_TRUE(alices->WaitForOutput(absl::Seconds(30)));
  v1::AbortResponse response;
  ASSERT_TRUE(AbortAs(kBob, "victim", &response).ok());
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_NOT_FOUND);
  const int before = alices->Snapshot().output_chunks;
  EXPECT_TRUE(alices->WaitUntil(
      [before](const GenerateResult& r) { return r.output_chunks > before + 3; },
      absl::Seconds(10)))
      << "bob's abort stopped alice's request";

  ASSERT_TRUE(AbortAs(kAlice, "victim", &response).ok());
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult r = alices->Wait(absl::Seconds(10));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT);
}

// A gateway's token runs a request as alice (a line of her batch): it is
// hers (bob's abort is NOT_FOUND, hers stops it). Only a gateway's token may
// act for another, and only for an identity the tokens file names.
TEST_F(SecurityProcessTest, AGatewayRunsARequestAsTheIdentityItNames) {
  std::unique_ptr<GenerateCall> line = Start("line-1", 100000, kGateway, "alice");
  ASSERT_TRUE(line->WaitForOutput(absl::Seconds(30)));
  v1::AbortResponse response;
  ASSERT_TRUE(AbortAs(kBob, "line-1", &response).ok());
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_NOT_FOUND);
  ASSERT_TRUE(AbortAs(kAlice, "line-1", &response).ok());
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  EXPECT_EQ(line->Wait(absl::Seconds(10)).terminal.finish_reason(), v1::FINISH_REASON_ABORT);

  const GenerateResult as_user = Start("x1", 4, kAlice, "bob")->Wait(absl::Seconds(30));
  EXPECT_EQ(as_user.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(as_user.status.error_message(), HasSubstr("on_behalf_of needs the gateway role"));
  const GenerateResult unknown = Start("x2", 4, kGateway, "mallory")->Wait(absl::Seconds(30));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("'mallory'"));
  // Its own requests run as itself, as any user's.
  ExpectOneTerminal(Start("own", 4, kGateway)->Wait(absl::Seconds(30)));
}

// An operator stops a runaway request: an admin token aborts any identity's.
TEST_F(SecurityProcessTest, AnAdminAbortsAnotherIdentitysRequest) {
  std::unique_ptr<GenerateCall> alices = Start("runaway", 100000, kAlice);
  ASSERT_TRUE(alices->WaitForOutput(absl::Seconds(30)));
  v1::AbortResponse response;
  ASSERT_TRUE(AbortAs(kOps, "runaway", &response).ok());
  ASSERT_EQ(response.results_size(), 1);
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  const GenerateResult r = alices->Wait(absl::Seconds(10));
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_ABORT);
}

TEST_F(SecurityProcessTest, ARevokedTokenIsRefusedWithinSeconds) {
  ExpectOneTerminal(Start("b1", 2, kBob)->Wait(absl::Seconds(30)));
  WriteTokens(tokens_, {"alice", "ops"});
  EXPECT_TRUE(Eventually(
      [&] {
        return Start("b2", 2, kBob)->Wait(absl::Seconds(10)).status.error_code() ==
               grpc::StatusCode::UNAUTHENTICATED;
      },
      absl::Seconds(5), absl::Milliseconds(200)));
  ExpectOneTerminal(Start("a1", 2, kAlice)->Wait(absl::Seconds(30)));
}

TEST_F(SecurityProcessTest, OnlyTheOrchestratorsCertificateOpensWorkerSessions) {
  const std::string worker = absl::StrCat("127.0.0.1:", pipeline_->worker_port(0, 0));
  WorkerTestClient plaintext(grpc::CreateChannel(worker, grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(plaintext.Connect().ok());
  WorkerTestClient anonymous(
      grpc::CreateChannel(worker, ChannelCredentialsFor(TlsFiles{"", "", pki_.ca_file()})));
  EXPECT_FALSE(anonymous.Connect().ok());
  TlsFiles rogue = rogue_ca_.Issue("rogue", {});
  rogue.ca = pki_.ca_file();
  WorkerTestClient stranger(grpc::CreateChannel(worker, ChannelCredentialsFor(rogue)));
  EXPECT_FALSE(stranger.Connect().ok());
}

grpc::health::v1::HealthCheckResponse::ServingStatus PlaintextHealth(int port,
                                                                     const std::string& service) {
  return HealthOf(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                      grpc::InsecureChannelCredentials()),
                  service);
}

// The kubelet's gRPC probes cannot speak TLS: a plaintext port answers health
// checks, and refuses everything else.
TEST_F(SecurityProcessTest, ThePlaintextHealthPortAnswersProbesAndNothingElse) {
  const int health = ListeningLineIn(pipeline_->orchestrator()->output()).Number("health_port");
  ASSERT_GT(health, 0) << pipeline_->orchestrator()->output();
  EXPECT_EQ(PlaintextHealth(health, ""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(PlaintextHealth(health, "omnistage.v1.Orchestrator"),
            grpc::health::v1::HealthCheckResponse::SERVING);
  std::shared_ptr<v1::Orchestrator::Stub> plaintext = v1::Orchestrator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", health), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  Authorize(context, kOps);
  v1::PipelineStatus status;
  grpc::Status refused =
      plaintext->GetPipelineStatus(&context, v1::PipelineStatusRequest(), &status);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(refused.error_message(),
            "this port answers only health checks in plaintext; call the serving port over TLS");
  GenerateResult generate = GenerateCall(plaintext, MakeRequest("p", "hi"), absl::Seconds(10),
                                         kAlice)
                                .Wait(absl::Seconds(10));
  EXPECT_EQ(generate.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // A worker likewise.
  std::unique_ptr<ChildProcess> worker = *ChildProcess::Start(
      {kStageWorkerBinary, "--listen=127.0.0.1:0", "--health_listen=127.0.0.1:0",
       "--tls_cert=" + worker_cert_.cert, "--tls_key=" + worker_cert_.key,
       "--tls_client_ca=" + pki_.ca_file()});
  absl::StatusOr<std::string> line = worker->WaitForLine("listening port=", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << line.status();
  const int worker_health = ListeningLineIn(*line).Number("health_port");
  ASSERT_GT(worker_health, 0) << *line;
  EXPECT_EQ(PlaintextHealth(worker_health, "omnistage.v1.StageWorker"),
            grpc::health::v1::HealthCheckResponse::SERVING);
  WorkerTestClient rogue(grpc::CreateChannel(absl::StrCat("127.0.0.1:", worker_health),
                                             grpc::InsecureChannelCredentials()));
  absl::StatusOr<v1::Ready> ready = rogue.Connect();
  EXPECT_EQ(ready.status().code(), absl::StatusCode::kUnauthenticated) << ready.status();
}

TEST_F(SecurityProcessTest, CertificatesRotateUnderOpenStreams) {
  std::unique_ptr<GenerateCall> streaming = Start("long", 100000, kAlice);
  ASSERT_TRUE(streaming->WaitForOutput(absl::Seconds(30)));
  // cert-manager renews every certificate in place.
  pki_.Issue("orchestrator", {});
  pki_.Issue("worker", {});
  CertOptions client;
  client.dns_names = {"omnistage-orchestrator"};
  client.ips.clear();
  pki_.Issue("to-workers", client);
  absl::SleepFor(absl::Seconds(3 * kTlsRefreshSeconds));
  const int before = streaming->Snapshot().output_chunks;
  EXPECT_TRUE(streaming->WaitUntil(
      [before](const GenerateResult& r) { return r.output_chunks > before + 3; },
      absl::Seconds(10)))
      << "the stream stopped at the rotation";
  // New connections take the new files: a new client, and a worker restarted
  // (a new session, with the renewed certificates on both ends).
  EXPECT_TRUE(StatusAs(pipeline_->spec().client_tls, kOps).ok());
  v1::AbortResponse response;
  ASSERT_TRUE(AbortAs(kAlice, "long", &response).ok());
  ExpectOneTerminal(streaming->Wait(absl::Seconds(10)));
  ASSERT_TRUE(pipeline_->RestartWorker(0, 0).ok());
  ASSERT_TRUE(pipeline_->WaitAllAlive(absl::Seconds(20)).ok());
  ExpectOneTerminal(Start("after", 4, kAlice)->Wait(absl::Seconds(30)));
}

// Client certificates instead of tokens: only holders of one connect, and each
// certificate's name is an identity owning its requests.
TEST(SecurityClientCertificateTest, ACertificatesNameOwnsItsRequests) {
  const std::string dir = TestDirectory();
  TestPki pki(dir);
  PipelineSpec spec;
  spec.stages = {Stage("llm", "sim_llm", "step_time_us=2000", 1, true, "tokens")};
  const TlsFiles server = pki.Issue("orchestrator", {});
  spec.orchestrator_flags = {"--tls_cert=" + server.cert, "--tls_key=" + server.key,
                             "--tls_client_ca=" + pki.ca_file()};
  CertOptions alice_name;
  alice_name.dns_names = {"alice.clients"};
  alice_name.ips.clear();
  spec.client_tls = pki.Issue("alice", alice_name);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(spec);
  ASSERT_NE(pipeline, nullptr);

  // No certificate: no connection.
  auto anonymous =
      v1::Orchestrator::NewStub(pipeline->NewChannel(TlsFiles{"", "", pki.ca_file()}));
  GenerateResult refused =
      GenerateCall(std::move(anonymous), MakeRequest("x", "hi"), absl::Seconds(10))
          .Wait(absl::Seconds(10));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);

  std::unique_ptr<GenerateCall> alices =
      pipeline->StartGenerate(MakeRequest("hers", "go", {StageParams(0, 100000)}));
  ASSERT_TRUE(alices->WaitForOutput(absl::Seconds(30)));
  CertOptions bob_name;
  bob_name.dns_names = {"bob.clients"};
  bob_name.ips.clear();
  auto bob = v1::Orchestrator::NewStub(pipeline->NewChannel(pki.Issue("bob", bob_name)));
  v1::AbortRequest abort;
  abort.add_request_ids("hers");
  v1::AbortResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(bob->Abort(&context, abort, &response).ok());
  EXPECT_EQ(response.results(0).outcome(), v1::AbortResult::OUTCOME_NOT_FOUND);
  absl::StatusOr<v1::AbortResponse> own = pipeline->Abort({"hers"});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->results(0).outcome(), v1::AbortResult::OUTCOME_ABORTED);
  ExpectOneTerminal(alices->Wait(absl::Seconds(10)));
}

}  // namespace
}  // namespace omnistage
