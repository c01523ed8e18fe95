// The StageWorker gRPC service with a real client on port 0 and the sim_llm engine.
#include "stage_worker/worker_service.h"

#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/field_error.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"
#include "stage_worker/engines/registry.h"
#include "tests/worker_test_client.h"

namespace omnistage {
namespace {

class WorkerServiceTest : public ::testing::Test {
 protected:
  void StartWorker(std::map<std::string, std::string> params, int stage_id = 0,
                   int max_message_bytes = 16 << 20, StallOptions stall = {}) {
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine("sim_llm", params);
    ASSERT_TRUE(engine.ok()) << engine.status();
    WorkerOptions options;
    options.stage_id = stage_id;
    options.engine_name = "sim_llm";
    options.max_message_bytes = max_message_bytes;
    options.stall = stall;
    worker_ = std::make_unique<Worker>(options, *std::move(engine));
    WorkerServerOptions server_options;
    server_options.max_receive_message_bytes = max_message_bytes;
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
    for (int i = 0; i < 1000; ++i) {
      std::optional<v1::WorkerEvent> event = client.Next(absl::Seconds(5));
      if (!event.has_value()) break;
      if (event->has_utility_result() && event->utility_result().call_id() == call_id) {
        return event->utility_result().value().struct_value();
      }
    }
    ADD_FAILURE() << "no stats result";
    return {};
  }

  static double Field(const google::protobuf::Struct& s, const std::string& name) {
    auto it = s.fields().find(name);
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  // Waits until the engine has no running or waiting request.
  bool WaitEngineIdle(WorkerTestClient& client) {
    for (uint64_t call = 1000; call < 1500; ++call) {
      google::protobuf::Struct stats = Stats(client, call);
      if (Field(stats, "running") == 0 && Field(stats, "waiting") == 0) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<Worker> worker_;
  std::unique_ptr<WorkerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(WorkerServiceTest, HandshakeReportsIdentity) {
  StartWorker({{"batch_size", "7"}}, /*stage_id=*/2);
  WorkerTestClient client(channel_);
  v1::Hello hello;
  hello.set_client_name("test");
  hello.set_protocol_version(1);
  hello.set_expected_stage_id(2);
  absl::StatusOr<v1::Ready> ready = client.Connect(hello);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->stage_id(), 2);
  EXPECT_EQ(ready->engine(), "sim_llm");
  EXPECT_EQ(ready->max_message_bytes(), 16 << 20);
  EXPECT_EQ(ready->capacity(), 7);
  EXPECT_EQ(ready->instance_id(), worker_->instance_id());
  EXPECT_FALSE(ready->instance_id().empty());
  EXPECT_FALSE(ready->session_id().empty());
  EXPECT_EQ(ready->protocol_version(), 1u);
}

TEST_F(WorkerServiceTest, HelloIsChecked) {
  StartWorker({}, /*stage_id=*/1);
  {
    WorkerTestClient client(channel_);
    v1::Hello hello;
    hello.set_expected_stage_id(2);
    absl::StatusOr<v1::Ready> ready = client.Connect(hello);
    EXPECT_EQ(ready.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(ready.status().message().find("serves stage 1, not stage 2"), std::string::npos)
        << ready.status();
  }
  {
    WorkerTestClient client(channel_);
    v1::Hello hello;
    hello.set_protocol_version(99);
    EXPECT_EQ(client.Connect(hello).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  {
    // The first command must be a hello.
    v1::StageWorker::Stub* stub = nullptr;
    WorkerTestClient client(channel_);
    stub = &client.stub();
    grpc::ClientContext context;
    auto stream = stub->Connect(&context);
    v1::WorkerCommand add;
    add.set_seq(1);
    add.mutable_add()->set_request_id("r");
    stream->Write(add);
    v1::WorkerEvent event;
    EXPECT_FALSE(stream->Read(&event));
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("must be hello"), std::string::npos);
  }
}

// The client's stage defaults are checked at the Hello: refused ones name their
// field, so a config mistake shows once, at start-up, not in every request.
TEST_F(WorkerServiceTest, HelloWithDefaultsTheEngineRefusesNamesTheField) {
  StartWorker({});
  struct Case {
    std::string extra_key;
    uint32_t max_tokens;
    std::string field;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"colour", 0, "defaults.extra.colour",
            "stage defaults: engine sim_llm: unknown extra parameter 'colour'"},
           {"", 2000000, "defaults.max_tokens",
            "stage defaults: engine sim_llm: max_tokens must be in [1, 1000000], got 2000000"}}) {
    WorkerTestClient client(channel_);
    v1::Hello hello;
    if (!c.extra_key.empty()) (*hello.mutable_defaults()->mutable_extra())[c.extra_key] = "red";
    if (c.max_tokens > 0) hello.mutable_defaults()->set_max_tokens(c.max_tokens);
    absl::StatusOr<v1::Ready> ready = client.Connect(hello);
    EXPECT_EQ(ready.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ErrorField(ready.status()), c.field);
    EXPECT_EQ(std::string(ready.status().message()).substr(0, c.message.size()), c.message);
    std::optional<grpc::Status> end = client.WaitForEnd(absl::Seconds(10));
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  WorkerTestClient client(channel_);
  v1::Hello hello;
  hello.mutable_defaults()->set_max_tokens(8);
  EXPECT_TRUE(client.Connect(hello).ok());
}

// A bad parameter of one request is refused for that request, naming its field
// within the AddRequest.
TEST_F(WorkerServiceTest, RejectedAddNamesTheFieldOfTheRequest) {
  StartWorker({});
  auto client = NewClient();
  v1::WorkerCommand command;
  command.mutable_add()->set_request_id("r");
  command.mutable_add()->add_input()->mutable_text()->set_text("x");
  (*command.mutable_add()->mutable_params()->mutable_extra())["voice"] = "alto";
  client->Send(command);
  std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(10));
  ASSERT_TRUE(event.has_value() && event->has_rejected());
  EXPECT_EQ(event->rejected().error().field(), "params.extra.voice");
  EXPECT_EQ(event->rejected().command(), v1::CommandRejected::KIND_ADD);
}

TEST_F(WorkerServiceTest, OutputsOfOneStepTravelAsOneMessage) {
  StartWorker({{"batch_size", "8"}, {"step_time_us", "2000"}});
  auto client = NewClient();
  const std::vector<std::string> ids = {"a", "b", "c", "d"};
  for (const std::string& id : ids) client->Add(id, "prompt " + id, 20);
  std::map<std::string, int> tokens;
  std::set<std::string> finished;
  std::set<uint64_t> steps_seen;
  size_t widest = 0;
  while (finished.size() < ids.size()) {
    std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(10));
    ASSERT_TRUE(event.has_value()) << "stream stalled";
    ASSERT_TRUE(event->has_step());
    // One message per engine step for this session.
    EXPECT_TRUE(steps_seen.insert(event->step().step()).second) << event->step().step();
    std::set<std::string> in_event;
    for (const v1::RequestOutput& out : event->step().outputs()) {
      EXPECT_TRUE(in_event.insert(out.request_id()).second) << "two outputs for one request";
      for (const v1::Payload& p : out.payloads()) tokens[out.request_id()] += p.tokens().ids_size();
      if (out.finished()) {
        EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_LENGTH);
        finished.insert(out.request_id());
      }
    }
    widest = std::max(widest, in_event.size());
  }
  for (const std::string& id : ids) EXPECT_EQ(tokens[id], 20) << id;
  EXPECT_EQ(widest, ids.size()) << "no step carried every running request";
  EXPECT_EQ(worker_->live_requests(), 0u);
}

TEST_F(WorkerServiceTest, AddImmediatelyFollowedByAbortIsNeverOvertaken) {
  StartWorker({{"batch_size", "16"}, {"step_time_us", "100"}});
  auto client = NewClient();
  std::set<std::string> aborted;
  for (int i = 0; i < 200; ++i) {
    const std::string id = absl::StrCat("r", i);
    client->Add(id, "long", 1000000);
    absl::StatusOr<std::vector<std::string>> result = client->Abort({id});
    ASSERT_TRUE(result.ok()) << result.status();
    // Had the abort overtaken the add, the id would not have been live yet.
    ASSERT_EQ(*result, std::vector<std::string>{id}) << "iteration " << i;
    aborted.insert(id);
  }
  EXPECT_EQ(worker_->live_requests(), 0u);
  // Each aborted request ended once, with ABORT, and nothing for it follows.
  // (Read before WaitEngineIdle, which consumes events.)
  std::map<std::string, int> finished;
  while (std::optional<v1::WorkerEvent> event = client->Next(absl::Milliseconds(300))) {
    if (!event->has_step()) continue;
    for (const v1::RequestOutput& out : event->step().outputs()) {
      EXPECT_EQ(finished[out.request_id()], 0) << out.request_id() << " output after its end";
      if (!out.finished()) continue;
      ++finished[out.request_id()];
      EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ABORT) << out.request_id();
      EXPECT_EQ(out.error().code(), static_cast<int>(absl::StatusCode::kAborted));
    }
  }
  EXPECT_EQ(finished.size(), aborted.size());
  EXPECT_TRUE(WaitEngineIdle(*client));
}

TEST_F(WorkerServiceTest, AbortArrivingBeforeItsAddWaitsAndLeavesOnlyItsEnd) {
  StartWorker({{"batch_size", "4"}});
  auto client = NewClient();
  for (int i = 0; i < 20; ++i) {
    const std::string id = absl::StrCat("early", i);
    const uint64_t add_seq = client->last_seq() + 1;
    absl::Notification returned;
    v1::WorkerAbortResponse response;
    grpc::Status status;
    std::thread aborter([&] {
      v1::WorkerAbortRequest request;
      request.set_session_id(client->session_id());
      request.set_after_seq(add_seq);
      request.add_request_ids(id);
      grpc::ClientContext context;
      status = client->stub().Abort(&context, request, &response);
      returned.Notify();
    });
    // The abort is fenced on a command not sent yet: it must wait.
    EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
    v1::WorkerCommand add;
    add.set_seq(add_seq);
    add.mutable_add()->set_request_id(id);
    add.mutable_add()->add_input()->mutable_text()->set_text("x");
    add.mutable_add()->set_input_complete(true);
    add.mutable_add()->mutable_params()->set_max_tokens(1000);
    client->Send(add);
    EXPECT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(10)));
    aborter.join();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.aborted_ids_size(), 1);
    EXPECT_EQ(response.aborted_ids(0), id);
  }
  // Add and its parked abort reach the loop together: the engine produced
  // nothing; each request's only output is its finished ABORT.
  int ends = 0;
  while (std::optional<v1::WorkerEvent> event = client->Next(absl::Milliseconds(300))) {
    ASSERT_TRUE(event->has_step()) << event->DebugString();
    for (const v1::RequestOutput& out : event->step().outputs()) {
      EXPECT_TRUE(out.finished()) << out.DebugString();
      EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ABORT);
      EXPECT_EQ(out.payloads_size(), 0) << out.DebugString();
      ++ends;
    }
  }
  EXPECT_EQ(ends, 20);
  EXPECT_TRUE(WaitEngineIdle(*client));
}

TEST_F(WorkerServiceTest, DroppedSessionLeavesNoWork) {
  StartWorker({{"batch_size", "8"}, {"step_time_us", "1000"}});
  auto observer = NewClient();
  for (bool cancel : {true, false}) {
    auto client = NewClient();
    for (int i = 0; i < 5; ++i) client->Add(absl::StrCat("r", i), "work", 1000000);
    ASSERT_TRUE(client->Next(absl::Seconds(5)).has_value());  // Running.
    if (cancel) {
      client->Cancel();  // Like a crashed orchestrator.
    } else {
      client->CloseWrites();  // An orchestrator that closes its session.
    }
    EXPECT_TRUE(WaitEngineIdle(*observer)) << (cancel ? "cancel" : "close");
  }
  EXPECT_EQ(worker_->live_requests(), 0u);
}

TEST_F(WorkerServiceTest, UtilityResultsAndErrorsByCallId) {
  StartWorker({});
  auto client = NewClient();
  auto call = [&](uint64_t id, const std::string& name, std::vector<double> args) {
    v1::WorkerCommand command;
    command.mutable_utility()->set_call_id(id);
    command.mutable_utility()->set_name(name);
    for (double a : args) command.mutable_utility()->mutable_args()->add_values()->set_number_value(a);
    client->Send(command);
  };
  call(7, "div", {1, 0});
  call(8, "div", {6, 3});
  call(9, "ping", {});
  std::map<uint64_t, v1::UtilityResult> results;
  while (results.size() < 3) {
    std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(5));
    ASSERT_TRUE(event.has_value());
    ASSERT_TRUE(event->has_utility_result());
    results[event->utility_result().call_id()] = event->utility_result();
  }
  EXPECT_TRUE(results[7].has_error());
  EXPECT_EQ(results[7].error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_DOUBLE_EQ(results[8].value().number_value(), 2.0);
  EXPECT_EQ(results[9].value().string_value(), "pong");
  // The engine goes on after a utility error.
  client->Add("after", "x", 3);
  EXPECT_FALSE(client->CollectUntilFinished("after", absl::Seconds(5)).empty());
}

// Expects the next event other than step outputs to reject command `seq` with
// `code`, naming `words`.
void ExpectRejected(WorkerTestClient& client, uint64_t seq, absl::StatusCode code,
                    const std::string& words) {
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
}

TEST_F(WorkerServiceTest, BadCommandsAreRejectedAndTheSessionGoesOn) {
  StartWorker({{"step_time_us", "1000"}});
  auto client = NewClient();
  ExpectRejected(*client, client->Add("", "x", 4), absl::StatusCode::kInvalidArgument,
                 "request_id is empty");
  ExpectRejected(*client, client->Add(std::string(129, 'x'), "x", 4),
                 absl::StatusCode::kInvalidArgument, "129 bytes");
  ExpectRejected(*client, client->Add("zero", "x", 0), absl::StatusCode::kInvalidArgument,
                 "max_tokens");
  {
    v1::WorkerCommand command;
    command.mutable_add()->set_request_id("extra");
    command.mutable_add()->set_input_complete(true);
    command.mutable_add()->add_input()->mutable_text()->set_text("x");
    (*command.mutable_add()->mutable_params()->mutable_extra())["no_such_knob"] = "1";
    ExpectRejected(*client, client->Send(command), absl::StatusCode::kInvalidArgument,
                   "no_such_knob");
  }
  client->Add("dup", "x", 1000000);
  ExpectRejected(*client, client->Add("dup", "x", 4), absl::StatusCode::kAlreadyExists, "dup");
  v1::WorkerCommand stale;
  stale.set_seq(1);  // Sequence numbers must increase.
  stale.mutable_add()->set_request_id("stale");
  ExpectRejected(*client, client->Send(stale), absl::StatusCode::kInvalidArgument,
                 "does not increase");
  v1::WorkerCommand hello;
  hello.mutable_hello();
  ExpectRejected(*client, client->Send(hello), absl::StatusCode::kInvalidArgument,
                 "hello already");
  // The session still works.
  EXPECT_EQ(*client->Abort({"dup"}), std::vector<std::string>{"dup"});
  client->Add("fine", "x", 2);
  EXPECT_FALSE(client->CollectUntilFinished("fine", absl::Seconds(5)).empty());
}

TEST_F(WorkerServiceTest, BadAbortsAreRefusedClearly) {
  StartWorker({});
  auto client = NewClient();
  v1::WorkerAbortRequest request;
  request.set_session_id("424242");
  request.add_request_ids("x");
  v1::WorkerAbortResponse response;
  {
    grpc::ClientContext context;
    grpc::Status status = client->stub().Abort(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("unknown session"), std::string::npos);
  }
  request.set_session_id(client->session_id());
  request.add_request_ids(std::string(200, 'y'));
  {
    grpc::ClientContext context;
    grpc::Status status = client->stub().Abort(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Unknown ids are ignored, not an error.
  EXPECT_TRUE(client->Abort({"never-added"})->empty());
}

TEST_F(WorkerServiceTest, OversizedMessageEndsTheStreamWithResourceExhausted) {
  StartWorker({}, 0, /*max_message_bytes=*/64 * 1024);
  auto client = NewClient();
  client->Add("big", std::string(128 * 1024, 'a'), 4);
  std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The worker itself is fine.
  auto other = NewClient();
  other->Add("small", "a", 2);
  EXPECT_FALSE(other->CollectUntilFinished("small", absl::Seconds(5)).empty());
}

TEST_F(WorkerServiceTest, ClientThatStopsReadingIsCutOffAndItsWorkAborted) {
  StartWorker({{"batch_size", "4"}});
  // A raw session that never reads: the worker's queue for it fills up.
  auto stub = v1::StageWorker::NewStub(channel_);
  grpc::ClientContext context;
  auto stream = stub->Connect(&context);
  v1::WorkerCommand hello;
  hello.set_seq(1);
  hello.mutable_hello();
  ASSERT_TRUE(stream->Write(hello));
  v1::WorkerCommand add;
  add.set_seq(2);
  add.mutable_add()->set_request_id("flood");
  add.mutable_add()->add_input()->mutable_text()->set_text("x");
  add.mutable_add()->set_input_complete(true);
  add.mutable_add()->mutable_params()->set_max_tokens(1000000);
  ASSERT_TRUE(stream->Write(add));
  // One event per step and zero step time: the backlog limit is reached within
  // a second or so; the worker then cancels the stream and aborts the request.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::SleepFor(absl::Milliseconds(200));
  while (worker_->live_requests() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(worker_->live_requests(), 0u);
  auto observer = NewClient();
  EXPECT_TRUE(WaitEngineIdle(*observer));
  // Stopped by the session's close, not by running to its end.
  EXPECT_EQ(Field(Stats(*observer, 1), "abort_calls"), 1);
  context.TryCancel();
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(std::shared_ptr<grpc::Channel> channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

TEST_F(WorkerServiceTest, FatalEngineErrorReachesEverySessionAndStopsServing) {
  StartWorker({{"fail_at_step", "3"}});
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::SERVING);
  auto a = NewClient();
  auto b = NewClient();
  a->Add("r", "x", 100);
  for (WorkerTestClient* client : {a.get(), b.get()}) {
    bool fatal = false;
    while (std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(5))) {
      if (event->has_fatal()) {
        fatal = true;
        EXPECT_NE(event->fatal().reason().find("step 3"), std::string::npos)
            << event->fatal().reason();
      }
    }
    EXPECT_TRUE(fatal);
    std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(5));
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_FALSE(worker_->Wait().ok());
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  WorkerTestClient late(channel_);
  EXPECT_EQ(late.Connect().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(WorkerServiceTest, ShutdownEndsSessionsAndReportsNotServing) {
  StartWorker({{"step_time_us", "1000"}});
  auto client = NewClient();
  client->Add("r", "x", 1000000);
  ASSERT_TRUE(client->Next(absl::Seconds(5)).has_value());
  worker_->RequestShutdown();
  EXPECT_TRUE(worker_->Wait().ok());
  std::optional<grpc::Status> end = client->WaitForEnd(absl::Seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

// Steps of 400 ms against a 100 ms stall timeout: each step stalls and returns.
// The session hears of the stall (its live requests are lost, health goes
// NOT_SERVING, new requests are refused) and of the recovery (the lost requests
// end with a finished ABORT, health SERVING again).
TEST_F(WorkerServiceTest, StalledStepIsReportedItsRequestsLostAndServingResumes) {
  StartWorker({{"step_time_us", "400000"}}, 0, 16 << 20,
              StallOptions{absl::Milliseconds(100), absl::ZeroDuration()});
  auto client = NewClient();
  client->Add("slow", "x", 5);
  std::optional<v1::WorkerEvent> event = client->Next(absl::Seconds(10));
  ASSERT_TRUE(event.has_value() && event->has_stalled()) << (event ? event->DebugString() : "");
  EXPECT_EQ(event->stalled().step(), 1u);
  EXPECT_GE(event->stalled().running_ms(), 100);
  EXPECT_EQ(event->stalled().stall_timeout_ms(), 100);
  EXPECT_EQ(worker_->StalledStep(), 1u);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  client->Add("refused", "x", 1);

  // The step returns: its outputs, the lost request's end, the refusal and the
  // recovery, in some order on the stream.
  bool recovered = false, slow_aborted = false, refused = false;
  while (!(recovered && slow_aborted && refused)) {
    std::optional<v1::WorkerEvent> next = client->Next(absl::Seconds(10));
    ASSERT_TRUE(next.has_value()) << "recovered=" << recovered << " aborted=" << slow_aborted
                                  << " refused=" << refused;
    if (next->has_recovered()) {
      EXPECT_EQ(next->recovered().step(), 1u);
      EXPECT_GE(next->recovered().took_ms(), 400);
      recovered = true;
    } else if (next->has_rejected()) {
      EXPECT_EQ(next->rejected().request_id(), "refused");
      EXPECT_EQ(next->rejected().error().code(), static_cast<int>(absl::StatusCode::kUnavailable));
      refused = true;
    } else if (next->has_step()) {
      for (const v1::RequestOutput& out : next->step().outputs()) {
        if (!out.finished()) continue;
        EXPECT_EQ(out.request_id(), "slow");
        EXPECT_EQ(out.finish_reason(), v1::FINISH_REASON_ABORT) << out.DebugString();
        EXPECT_EQ(out.error().message(), "lost when step 1 stalled");
        slow_aborted = true;
      }
    }
  }
  EXPECT_EQ(worker_->StalledStep(), 0u);
  EXPECT_EQ(Health(channel_), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(worker_->live_requests(), 0u);
}

}  // namespace
}  // namespace omnistage
