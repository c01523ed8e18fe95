// The stage_worker binary as a process: its port line, SIGTERM, fatal engine
// errors and crashes, and bad flags.
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/child_process.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"
#include "stage_worker/testing/worker_test_client.h"
#include "tests/reflection_client.grpc.pb.h"

namespace omnistage {
namespace {

constexpr char kWorker[] = "stage_worker/stage_worker";

struct RunningWorker {
  std::unique_ptr<ChildProcess> process;
  std::shared_ptr<grpc::Channel> channel;
};

RunningWorker StartWorker(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {kWorker, "--listen=127.0.0.1:0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  EXPECT_TRUE(process.ok()) << process.status();
  RunningWorker worker{*std::move(process), nullptr};
  absl::StatusOr<std::string> line = worker.process->WaitForLine("listening", absl::Seconds(20));
  EXPECT_TRUE(line.ok()) << line.status();
  const int port = line.ok() ? ListeningLineIn(*line).port : 0;
  EXPECT_GT(port, 0) << (line.ok() ? *line : "");
  worker.channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
  return worker;
}

TEST(StageWorkerProcessTest, ServesHealthAndDrainsThenExitsZeroOnSigterm) {
  RunningWorker worker = StartWorker({"--stage_id=1", "--engine=thinker"});
  auto health = grpc::health::v1::Health::NewStub(worker.channel);
  grpc::health::v1::HealthCheckRequest readiness;
  readiness.set_service("omnistage.v1.StageWorker");
  grpc::health::v1::HealthCheckResponse response;
  for (const grpc::health::v1::HealthCheckRequest& request :
       {grpc::health::v1::HealthCheckRequest(), readiness}) {
    grpc::ClientContext context;
    ASSERT_TRUE(health->Check(&context, request, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING)
        << "service '" << request.service() << "'";
  }

  // Server reflection lists the service (what grpcurl relies on).
  {
    auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(worker.channel);
    grpc::ClientContext reflection_context;
    auto stream = reflection->ServerReflectionInfo(&reflection_context);
    grpc::reflection::v1alpha::ServerReflectionRequest request;
    request.set_list_services("");
    ASSERT_TRUE(stream->Write(request));
    grpc::reflection::v1alpha::ServerReflectionResponse listing;
    ASSERT_TRUE(stream->Read(&listing));
    std::vector<std::string> names;
    for (const auto& service : listing.list_services_response().service()) {
      names.push_back(service.name());
    }
    EXPECT_NE(std::find(names.begin(), names.end(), "omnistage.v1.StageWorker"), names.end());
    stream->WritesDone();
  }

  WorkerTestClient client(worker.channel);
  absl::StatusOr<v1::Ready> ready = client.Connect();
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->stage_id(), 1);
  EXPECT_EQ(ready->engine(), "thinker");

  // SIGTERM drains: the session hears it, health says NOT_SERVING, and once the
  // session acknowledged (as an orchestrator does) with nothing running, the
  // worker ends its sessions and exits 0.
  worker.process->Signal(SIGTERM);
  std::optional<v1::WorkerEvent> draining = client.Next(absl::Seconds(10));
  ASSERT_TRUE(draining.has_value() && draining->has_draining());
  {
    grpc::ClientContext check;
    ASSERT_TRUE(health->Check(&check, readiness, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    grpc::ClientContext live;
    ASSERT_TRUE(health->Check(&live, {}, &response).ok());
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING)
        << "liveness must hold while draining";
  }
  v1::WorkerCommand ack;
  ack.mutable_drain_ack();
  client.Send(ack);
  EXPECT_EQ(worker.process->Wait(absl::Seconds(10)), 0);
  std::optional<grpc::Status> end = client.WaitForEnd(absl::Seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(StageWorkerProcessTest, FatalEngineErrorSendsFatalAndExitsNonZero) {
  RunningWorker worker = StartWorker({"--engine=sim_llm", "--engine_params=fail_at_step=2"});
  WorkerTestClient client(worker.channel);
  ASSERT_TRUE(client.Connect().ok());
  client.Add("r", "x", 10);
  bool fatal = false;
  for (const v1::WorkerEvent& event : client.EventsUntilEnd(absl::Seconds(20))) {
    fatal = fatal || event.has_fatal();
  }
  EXPECT_TRUE(fatal);
  std::optional<grpc::Status> end = client.WaitForEnd(absl::Seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(worker.process->Wait(absl::Seconds(10)), 1);
}

TEST(StageWorkerProcessTest, CrashBreaksTheStream) {
  RunningWorker worker = StartWorker({"--engine=sim_llm", "--engine_params=crash_at_step=2"});
  WorkerTestClient client(worker.channel);
  ASSERT_TRUE(client.Connect().ok());
  client.Add("r", "x", 10);
  std::optional<grpc::Status> end = client.WaitForEnd(absl::Seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(worker.process->Wait(absl::Seconds(10)), 128 + SIGABRT);
}

TEST(StageWorkerProcessTest, BadFlagsStopStartUpWithAClearMessage) {
  struct Case {
    std::vector<std::string> flags;
    // The line a spawner reads on stdout: which flag, and why ("" for none).
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {{"--engine=no_such_engine"},
       "refused field=engine reason=unknown engine 'no_such_engine' (known: sim_llm, listener, "
       "thinker, talker, vocoder, python)"},
      {{"--engine=sim_llm", "--engine_params=batch_size=x"},
       "refused field=engine_params.batch_size reason=engine sim_llm: parameter batch_size: "
       "expected an integer in [1, 65536], got 'x'"},
      {{"--engine=sim_llm", "--engine_params=bach_size=4"},
       "refused field=engine_params.bach_size reason=engine sim_llm: unknown parameter "
       "'bach_size'"},
      {{"--engine=sim_llm", "--engine_params=novalue"},
       "refused field=engine_params reason=--engine_params: expected key=value, got 'novalue'"},
      {{"--listen=256.0.0.1:99999"}, ""},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {kWorker};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
    ASSERT_TRUE(process.ok());
    if (!c.refusal.empty()) {
      absl::StatusOr<std::string> line = (*process)->WaitForLine("refused", absl::Seconds(10));
      ASSERT_TRUE(line.ok()) << c.flags.back() << ": " << line.status();
      EXPECT_EQ(line->substr(0, c.refusal.size()), c.refusal);
    }
    EXPECT_EQ((*process)->Wait(absl::Seconds(10)), 2) << c.flags.back();
    if (c.refusal.empty()) {
      EXPECT_EQ((*process)->output().find("refused"), std::string::npos) << c.flags.back();
    }
  }
}

}  // namespace
}  // namespace omnistage
