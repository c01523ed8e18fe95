// Tests for ReplicaSession over a hand-driven WorkerStub and a manual clock: the
// handshake, seq numbering and the Abort fence, commands too large for the
// worker, utility results and timeouts, refused Hellos, fatal events, and
// reconnecting with exponential backoff.
#include "orchestrator/replicas/replica_session.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/testing/manual_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/replicas/testing/fake_worker_stub.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records what the session reports.
class RecordingListener : public ReplicaListener {
 public:
  void OnReplicaReady(int stage, int replica, const v1::Ready& ready) override {
    events.push_back(absl::StrCat("ready ", stage, "/", replica, " ", ready.instance_id()));
  }
  void OnStepOutputs(int stage, int replica, v1::StepOutputs& outputs) override {
    events.push_back(absl::StrCat("step ", outputs.step()));
  }
  void OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) override {
    events.push_back(absl::StrCat("rejected ", rejected.request_id()));
  }
  void OnReplicaDown(int stage, int replica, const absl::Status& reason) override {
    events.push_back(absl::StrCat("down ", reason.message()));
    downs.push_back(reason);
  }
  void OnReplicaStalled(int stage, int replica, const v1::Stalled& stalled) override {
    events.push_back(absl::StrCat("stalled ", stage, "/", replica, " step ", stalled.step()));
  }
  void OnReplicaDraining(int stage, int replica, const v1::Draining& draining) override {
    events.push_back(absl::StrCat("draining ", stage, "/", replica));
  }
  std::vector<std::string> events;
  std::vector<absl::Status> downs;
};

class ReplicaSessionTest : public ::testing::Test {
 protected:
  void Start(ReplicaSessionOptions options = {}) {
    options.stage = 1;
    options.replica = 2;
    session_ = std::make_unique<ReplicaSession>(options, &stub_, &scheduler_);
    session_->set_listener(&listener_);
    session_->Start();
  }
  // The worker answers the latest Hello.
  void Ready(const std::string& instance, int64_t max_message_bytes = 0) {
    v1::WorkerEvent event;
    event.mutable_ready()->set_instance_id(instance);
    event.mutable_ready()->set_session_id(absl::StrCat("s-", instance));
    event.mutable_ready()->set_max_message_bytes(max_message_bytes);
    stub_.last_stream().Event(std::move(event));
  }
  static v1::AddRequest AddOf(const std::string& id, size_t bytes = 1) {
    v1::AddRequest add;
    add.set_request_id(id);
    add.add_input()->mutable_text()->set_text(std::string(bytes, 'x'));
    return add;
  }

  ManualScheduler scheduler_;
  FakeWorkerStub stub_;
  RecordingListener listener_;
  std::unique_ptr<ReplicaSession> session_;
};

TEST_F(ReplicaSessionTest, HelloCarriesTheStageAndItsDefaults) {
  ReplicaSessionOptions options;
  v1::StageParameters defaults;
  defaults.set_max_tokens(64);
  (*defaults.mutable_extra())["voice"] = "alto";
  options.defaults = defaults;
  Start(options);
  ASSERT_EQ(stub_.stream_count(), 1u);
  ASSERT_EQ(stub_.stream(0).written.size(), 1u);
  const v1::WorkerCommand& hello = stub_.stream(0).written[0];
  EXPECT_EQ(hello.seq(), 1u);
  EXPECT_EQ(hello.hello().expected_stage_id(), 1);
  EXPECT_EQ(hello.hello().protocol_version(), ReplicaSession::kProtocolVersion);
  EXPECT_EQ(hello.hello().defaults().max_tokens(), 64u);
  EXPECT_EQ(hello.hello().defaults().extra().at("voice"), "alto");
  Ready("w-1");
  EXPECT_THAT(listener_.events, ElementsAre("ready 1/2 w-1"));
}

TEST_F(ReplicaSessionTest, CommandsWaitForReadyThenCountUpAndAbortIsFencedAfterThem) {
  Start();
  v1::AddRequest early = AddOf("early");
  EXPECT_EQ(session_->Add(&early).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(early.request_id(), "early") << "a refused request must be handed back";
  int aborted = 0;
  session_->Abort({"x"}, absl::InfiniteFuture(),
                  [&](absl::StatusOr<std::vector<std::string>> stopped) {
                    EXPECT_EQ(stopped.status().code(), absl::StatusCode::kUnavailable);
                    ++aborted;
                  });
  EXPECT_EQ(aborted, 1);
  EXPECT_THAT(stub_.aborts(), IsEmpty());

  Ready("w-1");
  v1::AddRequest a = AddOf("a");
  ASSERT_TRUE(session_->Add(&a).ok());
  v1::AppendInput more;
  more.set_request_id("a");
  ASSERT_TRUE(session_->AppendInput(more).ok());
  const std::vector<v1::WorkerCommand>& written = stub_.stream(0).written;
  ASSERT_EQ(written.size(), 3u);
  EXPECT_EQ(written[1].seq(), 2u);
  EXPECT_EQ(written[1].add().request_id(), "a");
  EXPECT_EQ(written[2].seq(), 3u);

  const absl::Time deadline = scheduler_.Now() + absl::Seconds(2);
  absl::StatusOr<std::vector<std::string>> result = absl::UnknownError("pending");
  session_->Abort({"a", "gone"}, deadline,
                  [&](absl::StatusOr<std::vector<std::string>> stopped) { result = stopped; });
  ASSERT_EQ(stub_.aborts().size(), 1u);
  const FakeWorkerStub::AbortCall& call = stub_.aborts()[0];
  EXPECT_EQ(call.request.session_id(), "s-w-1");
  EXPECT_EQ(call.request.after_seq(), 3u) << "not fenced after the last command";
  EXPECT_THAT(call.request.request_ids(), ElementsAre("a", "gone"));
  EXPECT_EQ(call.deadline, deadline);
  // The worker found "a" live; "gone" had ended there: the caller hears which.
  v1::WorkerAbortResponse response;
  response.add_aborted_ids("a");
  call.done(response);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(*result, ElementsAre("a"));
}

// A command larger than the worker accepts would end the whole session: it is
// refused here, and the request is handed back for the caller to fail.
TEST_F(ReplicaSessionTest, CommandTooLargeForTheWorkerIsRefusedUnsent) {
  Start();
  Ready("w-1", /*max_message_bytes=*/1000);
  v1::AddRequest big = AddOf("big", 2000);
  const absl::Status status = session_->Add(&big);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("the worker accepts at most 1000"));
  EXPECT_EQ(big.input(0).text().text().size(), 2000u) << "the request was not handed back";
  EXPECT_EQ(stub_.stream(0).written.size(), 1u) << "sent anyway";
  v1::AddRequest small = AddOf("small", 10);
  EXPECT_TRUE(session_->Add(&small).ok());
  EXPECT_EQ(stub_.stream(0).written.back().seq(), 2u) << "a refused command used up a seq";
}

// Limits that do not line up are said at once: a stage-0 worker taking
// smaller messages than the longest prompt the config admits.
TEST_F(ReplicaSessionTest, AWorkerTakingLessThanTheLimitsNeedIsWarnedAbout) {
  ReplicaSessionOptions options;
  options.needed_message_bytes = 5000;
  Start(options);
  ::testing::internal::CaptureStderr();
  Ready("w-1", /*max_message_bytes=*/1000);
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warned, HasSubstr("accepts messages up to 1000 bytes; the longest prompt "
                                "limits.max_prompt_bytes admits needs 5000"));
  ::testing::internal::CaptureStderr();
  Ready("w-2", /*max_message_bytes=*/5000);
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("accepts messages"), std::string::npos);
}

// The kill race from the session's side: the stream broke but its end has not
// been delivered yet. Writes are refused as UNAVAILABLE with the request intact.
TEST_F(ReplicaSessionTest, WriteOnABrokenStreamIsUnavailable) {
  Start();
  Ready("w-1");
  stub_.stream(0).broken = true;
  v1::AddRequest add = AddOf("a", 5);
  EXPECT_EQ(session_->Add(&add).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(add.request_id(), "a");
  EXPECT_EQ(add.input(0).text().text(), "xxxxx");
}

TEST_F(ReplicaSessionTest, UtilityResultsByCallIdAndTimeouts) {
  ReplicaSessionOptions options;
  options.utility_timeout = absl::Seconds(5);
  Start(options);
  Ready("w-1");
  std::vector<std::string> results;
  auto record = [&](absl::StatusOr<google::protobuf::Value> v) {
    results.push_back(v.ok() ? v->string_value() : std::string(v.status().message()));
  };
  session_->CallUtility("stats", {}, record);
  session_->CallUtility("slow", {}, record);
  const std::vector<v1::WorkerCommand>& written = stub_.stream(0).written;
  ASSERT_EQ(written.size(), 3u);
  v1::WorkerEvent answer;
  answer.mutable_utility_result()->set_call_id(written[1].utility().call_id());
  answer.mutable_utility_result()->mutable_value()->set_string_value("ok");
  stub_.stream(0).Event(answer);
  EXPECT_THAT(results, ElementsAre("ok"));
  scheduler_.AdvanceBy(absl::Seconds(5));
  EXPECT_THAT(results, ElementsAre("ok", "utility call timed out"));
  // A result after the timeout is dropped.
  answer.mutable_utility_result()->set_call_id(written[2].utility().call_id());
  stub_.stream(0).Event(answer);
  EXPECT_EQ(results.size(), 2u);
}

TEST_F(ReplicaSessionTest, SessionEndReportsDownFailsUtilitiesAndReconnectsWithBackoff) {
  ReplicaSessionOptions options;
  options.reconnect_initial_backoff = absl::Milliseconds(100);
  options.reconnect_max_backoff = absl::Milliseconds(300);
  Start(options);
  Ready("w-1");
  absl::Status utility = absl::OkStatus();
  session_->CallUtility("stats", {}, [&](absl::StatusOr<google::protobuf::Value> v) {
    utility = v.status();
  });
  stub_.stream(0).End(absl::UnavailableError("Socket closed"));
  EXPECT_THAT(listener_.events, ElementsAre("ready 1/2 w-1", "down Socket closed"));
  EXPECT_EQ(utility.code(), absl::StatusCode::kUnavailable);
  // Backoff 100, 200, 300 (the cap), 300 ms between attempts while it fails.
  for (absl::Duration wait : {absl::Milliseconds(100), absl::Milliseconds(200),
                              absl::Milliseconds(300), absl::Milliseconds(300)}) {
    const size_t streams = stub_.stream_count();
    scheduler_.AdvanceBy(wait - absl::Milliseconds(1));
    EXPECT_EQ(stub_.stream_count(), streams) << "reconnected before " << wait;
    scheduler_.AdvanceBy(absl::Milliseconds(1));
    ASSERT_EQ(stub_.stream_count(), streams + 1) << "no reconnect after " << wait;
    stub_.last_stream().End(absl::UnavailableError("Connection refused"));
  }
  // A Ready resets the backoff.
  scheduler_.AdvanceBy(absl::Milliseconds(300));
  Ready("w-2");
  stub_.last_stream().End(absl::UnavailableError("again"));
  const size_t streams = stub_.stream_count();
  scheduler_.AdvanceBy(absl::Milliseconds(100));
  EXPECT_EQ(stub_.stream_count(), streams + 1);
  EXPECT_EQ(listener_.events.back(), "down again");
}

TEST_F(ReplicaSessionTest, EventsOfAnEarlierStreamAreIgnored) {
  Start();
  Ready("w-1");
  FakeWorkerStub::Stream& old = stub_.stream(0);
  old.End(absl::UnavailableError("reset"));
  scheduler_.AdvanceBy(absl::Seconds(1));
  ASSERT_EQ(stub_.stream_count(), 2u);
  v1::WorkerEvent step;
  step.mutable_step()->set_step(7);
  old.Event(step);
  EXPECT_EQ(listener_.events.back(), "down reset");
}

TEST_F(ReplicaSessionTest, FatalEventNamesTheEngineErrorWhenTheStreamEnds) {
  Start();
  Ready("w-1");
  v1::WorkerEvent fatal;
  fatal.mutable_fatal()->set_reason("injected failure at step 3");
  stub_.stream(0).Event(fatal);
  stub_.stream(0).End(absl::UnavailableError("stage worker failed"));
  ASSERT_EQ(listener_.downs.size(), 1u);
  EXPECT_EQ(listener_.downs[0].message(), "fatal engine error: injected failure at step 3");
}

// A worker that refuses the Hello (e.g. stage defaults its engine does not take)
// names the field; the session reports it as the reason it is down.
TEST_F(ReplicaSessionTest, RefusedHelloIsReportedWithTheField) {
  Start();
  v1::WorkerEvent refused;
  refused.mutable_rejected()->set_seq(1);
  refused.mutable_rejected()->set_command(v1::CommandRejected::KIND_HELLO);
  *refused.mutable_rejected()->mutable_error() = ErrorProto(AtField(
      absl::InvalidArgumentError("stage defaults: unknown extra parameter 'voice'"),
      "defaults.extra.voice"));
  stub_.stream(0).Event(refused);
  stub_.stream(0).End(absl::InvalidArgumentError("stage defaults: ..."));
  ASSERT_EQ(listener_.downs.size(), 1u);
  const absl::Status& down = listener_.downs[0];
  EXPECT_EQ(down.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(down.message(), "refused the session: stage defaults: unknown extra parameter 'voice'");
  EXPECT_EQ(ErrorField(down), "defaults.extra.voice");
  EXPECT_THAT(listener_.events, ElementsAre(HasSubstr("down refused the session")));
}

// A stalled worker keeps its session: the stall is reported, and its recovery as
// the same incarnation being ready again.
TEST_F(ReplicaSessionTest, StallAndRecoveryAreReportedOnTheSameSession) {
  Start();
  Ready("w-1");
  v1::WorkerEvent stalled;
  stalled.mutable_stalled()->set_step(42);
  stub_.stream(0).Event(stalled);
  v1::WorkerEvent recovered;
  recovered.mutable_recovered()->set_step(42);
  stub_.stream(0).Event(recovered);
  EXPECT_THAT(listener_.events, ElementsAre("ready 1/2 w-1", "stalled 1/2 step 42", "ready 1/2 w-1"));
  EXPECT_EQ(stub_.stream_count(), 1u) << "a stall is not a broken session";
}

TEST_F(ReplicaSessionTest, DrainingIsReported) {
  Start();
  Ready("w-1");
  v1::WorkerEvent draining;
  draining.mutable_draining()->set_drain_timeout_ms(30000);
  stub_.stream(0).Event(draining);
  EXPECT_THAT(listener_.events, ElementsAre("ready 1/2 w-1", "draining 1/2"));
  // Acknowledged on the stream, after anything sent before.
  ASSERT_EQ(stub_.stream(0).written.size(), 2u);
  EXPECT_TRUE(stub_.stream(0).written[1].has_drain_ack());
  EXPECT_EQ(stub_.stream(0).written[1].seq(), 2u);
}


TEST_F(ReplicaSessionTest, CloseCancelsTheStreamFailsUtilitiesAndNeverReconnects) {
  Start();
  Ready("w-1");
  absl::Status utility = absl::OkStatus();
  session_->CallUtility("stats", {}, [&](absl::StatusOr<google::protobuf::Value> v) {
    utility = v.status();
  });
  session_->Close(absl::UnavailableError("replica left discovery"));
  EXPECT_TRUE(stub_.stream(0).cancelled);
  EXPECT_EQ(utility.message(), "replica left discovery");
  // The cancelled stream's end is not reported, and nothing reconnects.
  stub_.stream(0).End(absl::CancelledError("cancelled"));
  scheduler_.AdvanceBy(absl::Minutes(1));
  EXPECT_EQ(stub_.stream_count(), 1u);
  EXPECT_THAT(listener_.events, ElementsAre("ready 1/2 w-1"));
  v1::AddRequest add = AddOf("a");
  EXPECT_EQ(session_->Add(&add).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace omnistage
