// SessionCommands on its own: what each command becomes in the engine's loop,
// what is rejected and how the session hears it, and a utility call's result
// finding its session. The whole worker is in worker_refusal_test.cc and
// worker_service_test.cc.
#include "stage_worker/session_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/engine_core_harness.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// Keeps every event written; a write completes at once.
class KeepingTransport : public EventTransport {
 public:
  void BeginWrite(const v1::WorkerEvent* event) override {
    events.push_back(*event);
    session->OnWriteDone(true);
  }
  void FinishStream(const absl::Status&) override {}
  void CancelStream() override {}

  ConnectSession* session = nullptr;
  std::vector<v1::WorkerEvent> events;
};

class SessionCommandsTest : public ::testing::Test {
 protected:
  SessionCommandsTest() {
    transport_.session = session_.get();
    session_->Open(std::nullopt);
    SessionCommands::Worker worker;
    worker.stage_id = 2;
    worker.instance_id = "w-1";
    worker.engine = &engine_;
    worker.submit = [this](std::vector<CoreMessage> batch) {
      for (CoreMessage& m : batch) submitted_.push_back(std::move(m));
    };
    worker.stalled_step = [this] { return stalled_; };
    worker.find_session = [this](uint64_t number) {
      return number == session_->number() ? session_ : nullptr;
    };
    commands_ = std::make_unique<SessionCommands>(std::move(worker));
  }

  v1::WorkerCommand Add(uint64_t seq, const std::string& id, bool complete = true) {
    v1::WorkerCommand command;
    command.set_seq(seq);
    command.mutable_add()->set_request_id(id);
    command.mutable_add()->add_input()->mutable_text()->set_text("hi");
    command.mutable_add()->set_input_complete(complete);
    return command;
  }

  // The CommandRejected events the session got, in order.
  std::vector<v1::CommandRejected> Rejections() const {
    std::vector<v1::CommandRejected> rejected;
    for (const v1::WorkerEvent& event : transport_.events) {
      if (event.has_rejected()) rejected.push_back(event.rejected());
    }
    return rejected;
  }

  engine_core_test::FakeEngine engine_;
  KeepingTransport transport_;
  std::shared_ptr<ConnectSession> session_ =
      std::make_shared<ConnectSession>(7, "", &transport_, 1);
  std::vector<CoreMessage> submitted_;
  uint64_t stalled_ = 0;
  std::unique_ptr<SessionCommands> commands_;
};

TEST_F(SessionCommandsTest, AnAddBecomesTheEnginesRequestUnderTheSessionsName) {
  v1::WorkerCommand add = Add(2, "r1");
  commands_->Handle(*session_, add);
  ASSERT_THAT(submitted_, SizeIs(1));
  EXPECT_EQ(submitted_[0].kind, CoreMessage::Kind::kAdd);
  EXPECT_EQ(submitted_[0].request.id, EngineRequestId(7, "r1"));
  ASSERT_THAT(submitted_[0].request.input, SizeIs(1));
  EXPECT_EQ(submitted_[0].request.input[0].text().text(), "hi");
  EXPECT_EQ(session_->live_count(), 1u);
  EXPECT_THAT(Rejections(), SizeIs(0));
}

TEST_F(SessionCommandsTest, ABadAddIsRejectedNamingTheRequestAndWhy) {
  v1::WorkerCommand unnamed = Add(2, "");
  commands_->Handle(*session_, unnamed);
  v1::WorkerCommand twice = Add(3, "r1");
  commands_->Handle(*session_, twice);
  v1::WorkerCommand again = Add(4, "r1");
  commands_->Handle(*session_, again);
  const std::vector<v1::CommandRejected> rejected = Rejections();
  ASSERT_THAT(rejected, SizeIs(2));
  EXPECT_EQ(rejected[0].seq(), 2u);
  EXPECT_EQ(rejected[0].command(), v1::CommandRejected::KIND_ADD);
  EXPECT_THAT(rejected[0].error().message(), HasSubstr("request_id is empty"));
  EXPECT_EQ(rejected[0].error().stage_id(), 2);
  EXPECT_EQ(rejected[1].seq(), 4u);
  EXPECT_EQ(rejected[1].request_id(), "r1");
  EXPECT_THAT(rejected[1].error().message(), HasSubstr("already live in this session"));
  EXPECT_THAT(submitted_, SizeIs(1));  // Only the good one.
}

TEST_F(SessionCommandsTest, AStalledEngineTakesNoRequest) {
  stalled_ = 41;
  v1::WorkerCommand add = Add(2, "r1");
  commands_->Handle(*session_, add);
  ASSERT_THAT(Rejections(), SizeIs(1));
  EXPECT_THAT(Rejections()[0].error().message(), HasSubstr("stalled in step 41"));
  EXPECT_THAT(submitted_, SizeIs(0));
  EXPECT_EQ(session_->live_count(), 0u);
}

// Deadlines become the engine's, under its names for the requests, counted
// from when they arrive; an id no request could have is skipped, never
// rejected.
TEST_F(SessionCommandsTest, DeadlinesBecomeTheEnginesCountedFromNow) {
  v1::WorkerCommand command;
  command.set_seq(2);
  v1::PlaybackDeadline* soon = command.mutable_deadlines()->add_deadlines();
  soon->set_request_id("r1");
  soon->set_slack_ms(1500);
  v1::PlaybackDeadline* past = command.mutable_deadlines()->add_deadlines();
  past->set_request_id("r2");
  past->set_slack_ms(-200);
  command.mutable_deadlines()->add_deadlines()->set_request_id("");  // no request's
  const absl::Time before = absl::Now();
  commands_->Handle(*session_, command);
  const absl::Time after = absl::Now();
  ASSERT_THAT(submitted_, SizeIs(1));
  EXPECT_EQ(submitted_[0].kind, CoreMessage::Kind::kDeadlines);
  const auto& deadlines = submitted_[0].deadlines;
  ASSERT_THAT(deadlines, SizeIs(2));
  EXPECT_EQ(deadlines[0].first, EngineRequestId(7, "r1"));
  EXPECT_GE(deadlines[0].second, before + absl::Milliseconds(1500));
  EXPECT_LE(deadlines[0].second, after + absl::Milliseconds(1500));
  EXPECT_EQ(deadlines[1].first, EngineRequestId(7, "r2"));
  EXPECT_LE(deadlines[1].second, after - absl::Milliseconds(200));
  EXPECT_THAT(Rejections(), SizeIs(0));
}

TEST_F(SessionCommandsTest, ABatchIsAppliedCommandByCommandAndMayNotNest) {
  v1::WorkerCommand batch;
  batch.set_seq(2);
  *batch.mutable_batch()->add_commands() = Add(2, "a");
  v1::WorkerCommand& nested = *batch.mutable_batch()->add_commands();
  nested.set_seq(3);
  nested.mutable_batch();
  *batch.mutable_batch()->add_commands() = Add(4, "b");
  commands_->Handle(*session_, batch);
  EXPECT_THAT(submitted_, SizeIs(2));
  ASSERT_THAT(Rejections(), SizeIs(1));
  EXPECT_EQ(Rejections()[0].seq(), 3u);
  EXPECT_THAT(Rejections()[0].error().message(), HasSubstr("a batch inside a batch"));
}

TEST_F(SessionCommandsTest, AUtilityResultGoesBackUnderTheClientsCallId) {
  v1::WorkerCommand call;
  call.set_seq(2);
  call.mutable_utility()->set_call_id(99);
  call.mutable_utility()->set_name("cache_stats");
  commands_->Handle(*session_, call);
  ASSERT_THAT(submitted_, SizeIs(1));
  ASSERT_EQ(submitted_[0].kind, CoreMessage::Kind::kUtility);
  google::protobuf::Value value;
  value.set_number_value(3);
  commands_->UtilityDone(submitted_[0].call_id, value);
  ASSERT_FALSE(transport_.events.empty());
  const v1::WorkerEvent& last = transport_.events.back();
  ASSERT_TRUE(last.has_utility_result());
  EXPECT_EQ(last.utility_result().call_id(), 99u);
  EXPECT_EQ(last.utility_result().value().number_value(), 3);
  // Answered once: a second result for the call goes nowhere.
  const size_t events = transport_.events.size();
  commands_->UtilityDone(submitted_[0].call_id, value);
  EXPECT_EQ(transport_.events.size(), events);
}

TEST_F(SessionCommandsTest, UtilityCallsForgottenAtTheLoopsEndAreNotAnswered) {
  v1::WorkerCommand call;
  call.set_seq(2);
  call.mutable_utility()->set_call_id(5);
  commands_->Handle(*session_, call);
  ASSERT_THAT(submitted_, SizeIs(1));
  commands_->ForgetUtilities();
  const size_t events = transport_.events.size();
  commands_->UtilityDone(submitted_[0].call_id, absl::InternalError("late"));
  EXPECT_EQ(transport_.events.size(), events);
}

}  // namespace
}  // namespace omnistage
