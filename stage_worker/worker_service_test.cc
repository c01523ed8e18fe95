// The StageWorker gRPC service with real clients on port 0 and the sim_llm
// engine: the handshake, one message per step, fenced aborts and the end each
// aborted request gets, dropped sessions, utilities, clients that stop reading.
#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

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
  EXPECT_EQ(ready->engine(), kEngineUnderTest);
  EXPECT_EQ(ready->max_message_bytes(), 16 << 20);
  EXPECT_EQ(ready->capacity(), 7);
  EXPECT_EQ(ready->instance_id(), worker_->instance_id());
  EXPECT_FALSE(ready->instance_id().empty());
  EXPECT_FALSE(ready->session_id().empty());
  EXPECT_EQ(ready->protocol_version(), 1u);
  // sim_llm, in C++ and in Python, is deterministic given its seed.
  EXPECT_EQ(ready->resume(), v1::RESUME_MODE_REPLAY);
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
  for (const v1::WorkerEvent& event :
       client->EventsUntilEnd(absl::Seconds(10), absl::Milliseconds(300))) {
    if (!event.has_step()) continue;
    for (const v1::RequestOutput& out : event.step().outputs()) {
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

// A batch is its commands applied in order, each with its own seq: every add
// runs, an abort fenced after the batch finds them all, a batch inside a batch
// is rejected alone. The worker says it takes batches.
TEST_F(WorkerServiceTest, ABatchAppliesItsCommandsInOrderEachWithItsSeq) {
  StartWorker({{"batch_size", "16"}, {"step_time_us", "1000"}});
  WorkerTestClient client(channel_);
  v1::Hello hello;
  hello.set_client_name("test");
  absl::StatusOr<v1::Ready> ready = client.Connect(hello);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_TRUE(ready->accepts_command_batches());
  EXPECT_TRUE(ready->playback_deadlines());
  std::vector<v1::WorkerCommand> commands;
  for (const std::string id : {"short", "long1", "long2"}) {
    v1::AddRequest* add = commands.emplace_back().mutable_add();
    add->set_request_id(id);
    add->add_input()->mutable_text()->set_text("prompt");
    add->set_input_complete(true);
    add->mutable_params()->set_max_tokens(id == "short" ? 3 : 1000000);
  }
  commands.emplace_back().mutable_batch();  // Rejected; the others stand.
  const uint64_t last = client.SendBatch(std::move(commands));
  EXPECT_EQ(last, 5u);  // The hello had seq 1.
  absl::StatusOr<std::vector<std::string>> aborted = client.Abort({"long1", "long2"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(*aborted, (std::vector<std::string>{"long1", "long2"}));
  std::map<std::string, v1::FinishReason> ends;
  bool rejected = false;
  while (ends.size() < 3 || !rejected) {
    std::optional<v1::WorkerEvent> event = client.Next(absl::Seconds(10));
    ASSERT_TRUE(event.has_value()) << "stream stalled";
    if (event->has_rejected()) {
      EXPECT_EQ(event->rejected().seq(), 5u);
      EXPECT_THAT(event->rejected().error().message(), ::testing::HasSubstr("batch inside"));
      rejected = true;
    }
    if (!event->has_step()) continue;
    for (const v1::RequestOutput& out : event->step().outputs()) {
      if (out.finished()) ends[out.request_id()] = out.finish_reason();
    }
  }
  EXPECT_EQ(ends["short"], v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(ends["long1"], v1::FINISH_REASON_ABORT);
  EXPECT_EQ(ends["long2"], v1::FINISH_REASON_ABORT);
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
  for (const v1::WorkerEvent& event :
       client->EventsUntilEnd(absl::Seconds(10), absl::Milliseconds(300))) {
    ASSERT_TRUE(event.has_step()) << event.DebugString();
    for (const v1::RequestOutput& out : event.step().outputs()) {
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
  StartWorker({{"test_utilities", "true"}});  // div
  auto client = NewClient();
  auto call = [&](uint64_t id, const std::string& name, std::vector<double> args) {
    v1::WorkerCommand command;
    command.mutable_utility()->set_call_id(id);
    command.mutable_utility()->set_name(name);
    for (double a : args)
      command.mutable_utility()->mutable_args()->add_values()->set_number_value(a);
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
  // It runs first (a step is taken only with work), then is gone (the stream was cut).
  while (worker_->steps() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GT(worker_->steps(), 0u) << "the request never ran";
  while (worker_->live_requests() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(worker_->live_requests(), 0u);
  auto observer = NewClient();
  EXPECT_TRUE(WaitEngineIdle(*observer));
  // Stopped by the session's close, not by running to its end.
  EXPECT_EQ(Field(Stats(*observer, 1), "abort_calls"), 1);
  context.TryCancel();
}

}  // namespace
}  // namespace omnistage

namespace omnistage {
namespace {

// The load (WorkerLoad.requests) of the first step event `client` gets that
// carries `want`; false if none does within `timeout`.
bool HearsLoad(WorkerTestClient& client, int want, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::optional<v1::WorkerEvent> event = client.Next(deadline - absl::Now());
    if (!event.has_value()) return false;
    if (event->has_step() && event->step().has_load() && event->step().load().requests() == want) {
      return true;
    }
  }
  return false;
}

TEST_F(WorkerServiceTest, EverySessionHearsTheWorkersLoad) {
  StartWorker({{"batch_size", "8"}, {"step_time_us", "2000"}});
  auto busy = NewClient();
  auto idle = NewClient();
  busy->Add("long", "prompt", 100000);
  // The idle session has no output, but hears the other's request.
  EXPECT_TRUE(HearsLoad(*idle, 1, absl::Seconds(10)));
  // A new session learns it in its Ready.
  WorkerTestClient late(channel_);
  absl::StatusOr<v1::Ready> ready = late.Connect();
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->load().requests(), 1);
  // An abort changes the load without a step: every session hears it anyway.
  absl::StatusOr<std::vector<std::string>> aborted = busy->Abort({"long"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_TRUE(HearsLoad(*idle, 0, absl::Seconds(10)));
  EXPECT_TRUE(HearsLoad(late, 0, absl::Seconds(10)));
  // So does a session that ends with its requests.
  busy->Add("again", "prompt", 100000);
  EXPECT_TRUE(HearsLoad(*idle, 1, absl::Seconds(10)));
  busy->Cancel();
  EXPECT_TRUE(HearsLoad(*idle, 0, absl::Seconds(10)));
}

}  // namespace
}  // namespace omnistage
