// Failover on its own: what a request keeps, the bound on it, a resume on
// another replica and its limits, and the trimming of a replayed run. The
// whole path through PipelineCore is in pipeline_core_failover_test.cc.
#include "orchestrator/core/failover.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "common/testing/manual_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

v1::Payload Text(const std::string& text) {
  v1::Payload payload;
  payload.mutable_text()->set_text(text);
  return payload;
}

v1::RequestOutput Output(const std::string& text, bool finished = false) {
  v1::RequestOutput output;
  output.set_request_id("r");
  *output.add_payloads() = Text(text);
  if (finished) {
    output.set_finished(true);
    output.set_finish_reason(v1::FINISH_REASON_STOP);
  }
  return output;
}

// Stage 0 without failover, stage 1 with it, over replicas A and B.
class FailoverTest : public ::testing::Test {
 protected:
  FailoverTest() {
    config_.stages.resize(2);
    config_.stages[0].name = "thinker";
    config_.stages[1].name = "talker";
    config_.stages[1].failover_max_attempts = 2;
    pools_.push_back(
        std::make_shared<StagePool>(0, std::vector<ReplicaClient*>{&zero_}, /*alive=*/false));
    pools_.push_back(
        std::make_shared<StagePool>(1, std::vector<ReplicaClient*>{&a_, &b_}, /*alive=*/false));
    Up(0, 0);
    Up(1, 0);
    Up(1, 1);
  }

  void Up(int stage, int replica) {
    v1::Ready ready;
    ready.set_instance_id(absl::StrCat("s", stage, "r", replica, "-", ++incarnation_));
    ready.set_capacity(4);
    ready.set_resume(v1::RESUME_MODE_REPLAY);
    pools_[stage]->Admit(replica, ready);
  }

  Failover& failover() {
    if (failover_ == nullptr) {
      failover_ = std::make_unique<Failover>(
          CoreParts{&config_, /*table=*/nullptr, &pools_, &metrics_, &scheduler_});
    }
    return *failover_;
  }

  // A request through both stages, its stage 1 input kept and sent.
  InFlightRequest& Start(const std::string& input) {
    request_.id = "r";
    request_.params.resize(2);
    request_.stages.resize(2);
    request_.last_stage = 1;
    request_.failover = failover().StateFor(v1::GenerateRequest(), 1);
    failover().KeepInput(request_, 1, Text(input), /*complete=*/true);
    v1::AddRequest add;
    add.set_request_id("r");
    *add.add_input() = Text(input);
    SubmitResult sent = pools_[1]->Submit(&add);
    EXPECT_TRUE(sent.status.ok()) << sent.status;
    request_.stages[1].started = true;
    request_.stages[1].replica = sent.replica;
    return request_;
  }

  // The replica running `r` on stage 1 goes away; Failover resumes it.
  Failover::Resumed Lose(InFlightRequest& r) {
    const int lost = r.stages[1].replica;
    pools_[1]->MarkDown(lost, absl::UnavailableError("gone"));
    v1::Error error;
    error.set_message("replica died");
    return failover().Resume(r, 1, lost, error);
  }

  FakeReplicaClient& fake(int replica) { return replica == 0 ? a_ : b_; }

  PipelineConfig config_;
  std::vector<std::string> log_;
  FakeReplicaClient zero_{"Z", &log_}, a_{"A", &log_}, b_{"B", &log_};
  std::vector<std::shared_ptr<StagePool>> pools_;
  MetricsRegistry registry_;
  PipelineMetrics metrics_{&registry_, {"thinker", "talker"}};
  ManualScheduler scheduler_;
  std::unique_ptr<Failover> failover_;
  InFlightRequest request_;
  int incarnation_ = 0;
};

TEST_F(FailoverTest, OnlyRequestsReachingAStageWithFailoverKeepAnything) {
  EXPECT_EQ(failover().StateFor(v1::GenerateRequest(), 0), nullptr);
  v1::GenerateRequest opted_out;
  opted_out.set_disable_failover(true);
  EXPECT_EQ(failover().StateFor(opted_out, 1), nullptr);
  std::unique_ptr<FailoverState> state = failover().StateFor(v1::GenerateRequest(), 1);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->stages.size(), 2u);
}

TEST_F(FailoverTest, AResumeSendsTheKeptInputToAnotherReplica) {
  InFlightRequest& r = Start("hello talker");
  const int first = r.stages[1].replica;
  Failover::Resumed resumed = Lose(r);
  EXPECT_FALSE(resumed.failed.has_value());
  EXPECT_TRUE(resumed.lost.empty());
  const int second = r.stages[1].replica;
  ASSERT_NE(second, first);
  EXPECT_EQ(pools_[1]->Bound("r"), second);
  ASSERT_EQ(fake(second).adds().size(), 1u);
  const v1::AddRequest& again = fake(second).adds().back();
  ASSERT_EQ(again.input_size(), 1);
  EXPECT_EQ(again.input(0).text().text(), "hello talker");
  EXPECT_TRUE(again.input_complete());
  EXPECT_EQ(r.failover->stages[1].attempts, 1);
}

TEST_F(FailoverTest, WithNoOtherLiveReplicaTheRequestFailsSayingWhy) {
  InFlightRequest& r = Start("x");
  pools_[1]->MarkDown(1 - r.stages[1].replica, absl::UnavailableError("down too"));
  Failover::Resumed resumed = Lose(r);
  ASSERT_TRUE(resumed.failed.has_value());
  EXPECT_THAT(resumed.failed->message(),
              HasSubstr("replica died; not resumed elsewhere: the stage has no other live "
                        "replica"));
}

TEST_F(FailoverTest, AttemptsAreBoundedPerStage) {
  config_.stages[1].failover_max_attempts = 1;
  InFlightRequest& r = Start("x");
  const int first = r.stages[1].replica;
  EXPECT_FALSE(Lose(r).failed.has_value());
  Up(1, first);  // Back, restarted: it could take the request again.
  Failover::Resumed resumed = Lose(r);
  ASSERT_TRUE(resumed.failed.has_value());
  EXPECT_THAT(resumed.failed->message(),
              HasSubstr("it failed over 1 time(s) already (failover.max_attempts)"));
}

TEST_F(FailoverTest, PastTheReplayBoundTheRequestFailsOverNoMore) {
  config_.max_replay_bytes = 8;
  InFlightRequest& r = Start("twelve bytes");
  EXPECT_FALSE(failover().Covers(r, 1));
  EXPECT_TRUE(r.failover->overflowed);
  EXPECT_TRUE(r.failover->stages[1].input.empty());  // Nothing is held any more.
  Failover::Resumed resumed = Lose(r);
  ASSERT_TRUE(resumed.failed.has_value());
  EXPECT_THAT(resumed.failed->message(), HasSubstr("limits.max_replay_bytes (8)"));
}

TEST_F(FailoverTest, AReplayedRunIsTrimmedToWhatWasNotDelivered) {
  InFlightRequest& r = Start("x");
  v1::RequestOutput delivered = Output("Hello");
  EXPECT_FALSE(failover().PassOn(r, 1, r.stages[1].replica, delivered).has_value());
  ASSERT_FALSE(Lose(r).failed.has_value());
  v1::RequestOutput replayed = Output("Hello, world", /*finished=*/true);
  EXPECT_FALSE(failover().PassOn(r, 1, r.stages[1].replica, replayed).has_value());
  ASSERT_EQ(replayed.payloads_size(), 1);
  EXPECT_EQ(replayed.payloads(0).text().text(), ", world");
}

TEST_F(FailoverTest, AReplayThatDiffersFailsTheRequestAsDataLoss) {
  InFlightRequest& r = Start("x");
  v1::RequestOutput delivered = Output("Hello");
  EXPECT_FALSE(failover().PassOn(r, 1, r.stages[1].replica, delivered).has_value());
  ASSERT_FALSE(Lose(r).failed.has_value());
  v1::RequestOutput replayed = Output("Howdy", /*finished=*/true);
  std::optional<v1::Error> differs = failover().PassOn(r, 1, r.stages[1].replica, replayed);
  ASSERT_TRUE(differs.has_value());
  EXPECT_EQ(differs->code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_THAT(differs->message(), HasSubstr("resumed the request by replay"));
  EXPECT_FALSE(pools_[1]->Bound("r").has_value());  // Finished: released.
}

TEST_F(FailoverTest, WhileAnAbortHoldsTheRequestTheResumeWaits) {
  InFlightRequest& r = Start("x");
  const int first = r.stages[1].replica;
  r.aborting = 1;
  Failover::Resumed resumed = Lose(r);
  EXPECT_FALSE(resumed.failed.has_value());
  EXPECT_TRUE(r.failover->stages[1].lost_while_aborting);
  EXPECT_TRUE(fake(1 - first).adds().empty());  // Sent nowhere meanwhile.
  EXPECT_EQ(r.failover->stages[1].attempts, 0);
}

}  // namespace
}  // namespace omnistage
