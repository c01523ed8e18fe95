// The fixture of the StageWorker service tests: a sim_llm Worker (C++, or its
// Python port) behind a real
// WorkerServer on port 0, real clients, and helpers to read the engine's stats
// through the busy loop.
#ifndef OMNISTAGE_STAGE_WORKER_TESTING_WORKER_SERVICE_HARNESS_H_
#define OMNISTAGE_STAGE_WORKER_TESTING_WORKER_SERVICE_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/testing/health_check.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/testing/worker_test_client.h"
#include "stage_worker/worker_service.h"

namespace omnistage {

class WorkerServiceTest : public ::testing::Test {
 protected:
  // The *_python tests (BUILD) run every worker test against sim_llm's Python
  // port, through the python engine: the busy loop's semantics must hold for it.
#ifdef OMNISTAGE_TEST_PYTHON_SIM_LLM
  static constexpr char kEngineUnderTest[] = "python";
#else
  static constexpr char kEngineUnderTest[] = "sim_llm";
#endif

  void StartWorker(std::map<std::string, std::string> params, int stage_id = 0,
                   int max_message_bytes = 16 << 20, StallOptions stall = {}) {
#ifdef OMNISTAGE_TEST_PYTHON_SIM_LLM
    params["path"] = "stage_worker/engines/python";
    params["module"] = "omnistage_engines.sim_llm";
    params["class"] = "SimLlm";
#endif
    StartWorkerWith(kEngineUnderTest, std::move(params), stage_id, max_message_bytes, stall);
  }

  void StartWorkerWith(const std::string& engine_name, std::map<std::string, std::string> params,
                       int stage_id = 0, int max_message_bytes = 16 << 20,
                       StallOptions stall = {}) {
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine(engine_name, params);
    ASSERT_TRUE(engine.ok()) << engine.status();
    WorkerOptions options;
    options.stage_id = stage_id;
    options.engine_name = engine_name;
    options.max_message_bytes = max_message_bytes;
    options.stall = stall;
    worker_ = std::make_unique<Worker>(options, *std::move(engine));
    WorkerServerOptions server_options;
    server_options.max_receive_message_bytes = max_message_bytes;
    server_options.tls = server_tls_;
    auto server = WorkerServer::Start(server_options, worker_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    worker_->Start();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  void TearDown() override {
    if (worker_ != nullptr) {
      worker_->RequestShutdown();
      (void)worker_->Wait();
    }
    server_.reset();
  }

  std::unique_ptr<WorkerTestClient> NewClient() {
    auto client = std::make_unique<WorkerTestClient>(channel_);
    absl::StatusOr<v1::Ready> ready = client->Connect();
    EXPECT_TRUE(ready.ok()) << ready.status();
    return client;
  }

  // Asks the engine (through the busy loop, so it is race-free) for its stats.
  static google::protobuf::Struct Stats(WorkerTestClient& client, uint64_t call_id) {
    v1::WorkerCommand command;
    command.mutable_utility()->set_call_id(call_id);
    command.mutable_utility()->set_name("stats");
    client.Send(command);
    std::optional<v1::WorkerEvent> event = client.NextWhere(
        [call_id](const v1::WorkerEvent& e) {
          return e.has_utility_result() && e.utility_result().call_id() == call_id;
        },
        absl::Seconds(10));
    if (!event.has_value()) {
      ADD_FAILURE() << "no stats result";
      return {};
    }
    return event->utility_result().value().struct_value();
  }

  static double Field(const google::protobuf::Struct& s, const std::string& name) {
    auto it = s.fields().find(name);
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  // Waits until the engine has no running or waiting request.
  bool WaitEngineIdle(WorkerTestClient& client) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (uint64_t call = 1000; absl::Now() < deadline; ++call) {
      google::protobuf::Struct stats = Stats(client, call);
      if (Field(stats, "running") == 0 && Field(stats, "waiting") == 0) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  // Set before StartWorker to serve TLS (channel_ then stays plaintext and
  // fails; tests make their own).
  TlsFiles server_tls_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<WorkerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Expects the next event other than step outputs to reject command `seq` with
// `code`, naming `words` and, when `field` is given, that field.
inline void ExpectRejected(WorkerTestClient& client, uint64_t seq, absl::StatusCode code,
                           const std::string& words, const std::string& field = "") {
  std::optional<v1::WorkerEvent> event;
  do {
    event = client.Next(absl::Seconds(5));
    ASSERT_TRUE(event.has_value());
  } while (event->has_step());
  ASSERT_TRUE(event->has_rejected()) << event->DebugString();
  EXPECT_EQ(event->rejected().seq(), seq);
  EXPECT_NE(event->rejected().command(), v1::CommandRejected::KIND_UNSPECIFIED);
  EXPECT_EQ(event->rejected().error().code(), static_cast<int>(code));
  EXPECT_NE(event->rejected().error().message().find(words), std::string::npos)
      << event->rejected().error().message();
  if (!field.empty()) {
    EXPECT_EQ(event->rejected().error().field(), field);
  }
}

// The worker's readiness ("omnistage.v1.StageWorker"), or with service "" its
// liveness.
inline grpc::health::v1::HealthCheckResponse::ServingStatus Health(
    std::shared_ptr<grpc::Channel> channel,
    const std::string& service = WorkerServer::kReadinessService) {
  return HealthOf(std::move(channel), service);
}

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_TESTING_WORKER_SERVICE_HARNESS_H_
