// The orchestrator's health service over a real in-process gRPC server, with the
// PipelineCore on a running EventLoop: liveness answers only from the loop,
// readiness follows live replicas and draining, Watch reports changes.
#include "orchestrator/service/health_service.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc/grpc_util.h"
#include "gtest/gtest.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

PipelineConfig TwoStages() {
  PipelineConfig config;
  for (int s = 0; s < 2; ++s) {
    StageConfig stage;
    stage.id = s;
    stage.name = absl::StrCat("s", s);
    stage.addresses = {absl::StrCat("h", s, ":1")};
    stage.final_output = s == 1;
    stage.output_modality = v1::MODALITY_TOKENS;
    stage.defaults.set_stage_id(s);
    config.stages.push_back(stage);
  }
  return config;
}

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int s = 0; s < 2; ++s) fakes_.push_back(std::make_unique<FakeReplicaClient>("f", &log_));
    core_ = std::make_unique<PipelineCore>(
        TwoStages(), std::vector<std::vector<ReplicaClient*>>{{fakes_[0].get()}, {fakes_[1].get()}},
        &loop_);
    health_ = std::make_unique<OrchestratorHealth>(core_.get(), &loop_);
    thread_ = std::thread([this] { loop_.Run(); });
    absl::StatusOr<StartedServer> server = StartGrpcServer(GrpcServerOptions(), {health_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    stub_ = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server->port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
    loop_.Stop();
    thread_.join();
  }

  // Runs `task` on the loop and waits for it.
  void OnLoop(std::function<void(PipelineCore&)> task) {
    absl::Notification done;
    loop_.Post([&] {
      task(*core_);
      done.Notify();
    });
    done.WaitForNotification();
  }
  void AllReady() {
    OnLoop([](PipelineCore& core) {
      for (int s = 0; s < 2; ++s) core.OnReplicaReady(s, 0, v1::Ready());
    });
  }

  absl::StatusOr<HealthCheckResponse::ServingStatus> Check(
      const std::string& service, absl::Duration deadline = absl::Seconds(5)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    grpc::Status status = stub_->Check(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response.status();
  }

  std::vector<std::string> log_;
  std::vector<std::unique_ptr<FakeReplicaClient>> fakes_;
  EventLoop loop_;
  std::unique_ptr<PipelineCore> core_;
  std::unique_ptr<OrchestratorHealth> health_;
  std::thread thread_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
};

TEST_F(HealthServiceTest, LivenessIsAnsweredByTheLoopAndNotWhileItIsStuck) {
  EXPECT_EQ(*Check(""), HealthCheckResponse::SERVING);
  absl::Notification release;
  loop_.Post([&] { release.WaitForNotification(); });  // The loop is stuck.
  absl::StatusOr<HealthCheckResponse::ServingStatus> stuck = Check("", absl::Milliseconds(300));
  EXPECT_EQ(stuck.status().code(), absl::StatusCode::kDeadlineExceeded);
  release.Notify();
  EXPECT_EQ(*Check(""), HealthCheckResponse::SERVING);
}

TEST_F(HealthServiceTest, ReadinessNeedsALiveReplicaInEveryStageAndNoDrain) {
  const std::string ready = OrchestratorHealth::kReadinessService;
  EXPECT_EQ(*Check(ready), HealthCheckResponse::NOT_SERVING) << "no replica has answered yet";
  AllReady();
  EXPECT_EQ(*Check(ready), HealthCheckResponse::SERVING);
  OnLoop([](PipelineCore& core) {
    core.OnReplicaDown(1, 0, absl::UnavailableError("gone"));
  });
  EXPECT_EQ(*Check(ready), HealthCheckResponse::NOT_SERVING) << "stage 1 has no live replica";
  EXPECT_EQ(*Check(""), HealthCheckResponse::SERVING) << "liveness is not readiness";
  AllReady();
  EXPECT_EQ(*Check(ready), HealthCheckResponse::SERVING);
  OnLoop([](PipelineCore& core) { core.Drain(absl::InfiniteFuture(), [] {}); });
  EXPECT_EQ(*Check(ready), HealthCheckResponse::NOT_SERVING) << "draining";
  EXPECT_EQ(*Check(""), HealthCheckResponse::SERVING) << "a draining orchestrator is alive";
}

TEST_F(HealthServiceTest, UnknownServicesAreNotFound) {
  EXPECT_EQ(Check("omnistage.v1.Nothing").status().code(), absl::StatusCode::kNotFound);
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("omnistage.v1.Nothing");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
}

TEST_F(HealthServiceTest, WatchReportsEachChange) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service(OrchestratorHealth::kReadinessService);
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  AllReady();
  ASSERT_TRUE(reader->Read(&response));  // Within about a second.
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  OnLoop([](PipelineCore& core) { core.OnReplicaDown(0, 0, absl::UnavailableError("gone")); });
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace omnistage
