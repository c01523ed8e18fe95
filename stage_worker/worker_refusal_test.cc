// What a stage worker refuses and how it says so: bad Hellos (stage, protocol,
// stage defaults its engine would refuse, naming the field), bad commands and
// aborts, requests naming their bad field, `produced` for an engine that
// resumes by replay, messages over the size limit.
#include <map>
#include <set>
#include <string>
#include <thread>

#include "common/field_error.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

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

// A replay engine given what a request already produced would produce it all
// again, and the client would receive that part twice: the Add is refused,
// naming the field, and the session goes on.
TEST_F(WorkerServiceTest, ProducedIsRefusedByAnEngineThatResumesByReplay) {
  StartWorker({});
  auto client = NewClient();
  v1::WorkerCommand command;
  v1::AddRequest* add = command.mutable_add();
  add->set_request_id("resumed");
  add->set_input_complete(true);
  add->add_input()->mutable_text()->set_text("x");
  add->add_produced()->mutable_tokens()->add_ids(7);
  ExpectRejected(*client, client->Send(command), absl::StatusCode::kInvalidArgument,
                 "resumes by replay", "produced");
  // The same id, without `produced`, runs: the refused Add never started.
  client->Add("resumed", "x", 2);
  EXPECT_FALSE(client->CollectUntilFinished("resumed", absl::Seconds(5)).empty());
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

}  // namespace
}  // namespace omnistage
