// StartQueue on its own, over a stage 0 of one replica with one slot: when a
// request waits, the order it leaves in, the bounds, parking while an abort
// holds it, and the drain. The whole path through PipelineCore is in
// pipeline_core_queue_test.cc.
#include "orchestrator/core/start_queue.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/metrics.h"
#include "common/retry_hint.h"
#include "common/testing/manual_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/testing/fake_response_sink.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class StartQueueTest : public ::testing::Test {
 protected:
  StartQueueTest() {
    config_.stages.resize(1);
    config_.stages[0].name = "thinker";
    config_.max_queued = 3;
    config_.max_queue_wait = absl::Seconds(10);
    config_.admission_headroom = 0;
    pools_.push_back(std::make_shared<StagePool>(0, std::vector<ReplicaClient*>{&replica_},
                                                 /*alive=*/false));
    v1::Ready ready;
    ready.set_capacity(1);
    pools_[0]->Admit(0, ready);
    queue_ = std::make_unique<StartQueue>(
        CoreParts{&config_, &table_, &pools_, &metrics_, &scheduler_},
        StartQueue::Hooks{[this](InFlightRequest& r) -> std::optional<v1::Error> {
                            started_.push_back(r.id + ":" + r.queued_prompt);
                            EXPECT_TRUE(pools_[0]->Pick(r.id).ok());  // Takes the slot.
                            return std::nullopt;
                          },
                          [this](const std::vector<std::string>& ids, const v1::Error& error) {
                            for (const std::string& id : ids) {
                              failed_.push_back(id);
                              queue_->Remove(id);
                              table_.Remove(id);
                            }
                            last_error_ = error;
                          },
                          [this](const InFlightRequest* r) {
                            // Requests named "audio..." want audio.
                            return audio_full_ &&
                                   (r == nullptr || absl::StartsWith(r->id, "audio"));
                          }});
  }

  InFlightRequest& Request(const std::string& id, const std::string& caller = "") {
    auto r = std::make_unique<InFlightRequest>();
    r->id = id;
    r->caller = caller;
    r->sink = sink_;
    return *table_.Add(std::move(r));
  }

  // A request that arrives now: queued when it must wait, else started.
  absl::Status Arrive(const std::string& id, int priority = 0, const std::string& caller = "") {
    InFlightRequest& r = Request(id, caller);
    if (!queue_->MustWait(r)) {
      pools_[0]->Pick(id).IgnoreError();
      started_.push_back(id + ":at once");
      return absl::OkStatus();
    }
    absl::Status queued = queue_->Add(r, "prompt-" + id, priority, /*weight=*/1);
    if (!queued.ok()) table_.Remove(id);
    queue_->Pump();
    return queued;
  }

  // The request on stage 0 ends, freeing its slot.
  void End(const std::string& id) {
    pools_[0]->Release(id);
    table_.Remove(id);
    queue_->Pump();
  }

  PipelineConfig config_;
  std::vector<std::string> log_;
  FakeReplicaClient replica_{"A", &log_};
  std::vector<std::shared_ptr<StagePool>> pools_;
  ManualScheduler scheduler_;
  RequestTable table_{&scheduler_};
  MetricsRegistry registry_;
  PipelineMetrics metrics_{&registry_, {"thinker"}};
  std::shared_ptr<FakeResponseSink> sink_ = std::make_shared<FakeResponseSink>();
  std::unique_ptr<StartQueue> queue_;
  // What audio_waits answers: the pipeline holds all the audio streams it may.
  bool audio_full_ = false;
  // A request that would arrive now (not in the table).
  InFlightRequest probe_;
  std::vector<std::string> started_;
  std::vector<std::string> failed_;
  v1::Error last_error_;
};

TEST_F(StartQueueTest, ARequestWaitsOnlyWhileStageZeroIsFull) {
  EXPECT_FALSE(queue_->MustWait(probe_));
  ASSERT_TRUE(Arrive("a").ok());
  EXPECT_TRUE(queue_->MustWait(probe_));
  ASSERT_TRUE(Arrive("b").ok());
  EXPECT_THAT(started_, ElementsAre("a:at once"));
  EXPECT_EQ(queue_->order().size(), 1u);
  End("a");
  EXPECT_THAT(started_, ElementsAre("a:at once", "b:prompt-b"));
  EXPECT_TRUE(queue_->order().empty());
}

// With stage 0's slots free, a request that wants audio waits while the
// pipeline holds all the audio streams it may; one that does not goes at
// once; nothing leaves the queue until audio is free again.
TEST_F(StartQueueTest, AudioCapacityHoldsRequestsThatWantAudio) {
  config_.admission_headroom = 8;  // Free slots on stage 0.
  audio_full_ = true;
  ASSERT_TRUE(Arrive("text-1").ok());
  ASSERT_TRUE(Arrive("audio-1").ok());
  ASSERT_TRUE(Arrive("text-2").ok());  // Behind the one waiting.
  EXPECT_THAT(started_, ElementsAre("text-1:at once"));
  EXPECT_EQ(queue_->order().size(), 2u);
  queue_->Pump();
  EXPECT_EQ(queue_->order().size(), 2u);
  audio_full_ = false;
  queue_->Pump();
  EXPECT_THAT(started_,
              ElementsAre("text-1:at once", "audio-1:prompt-audio-1", "text-2:prompt-text-2"));
}

TEST_F(StartQueueTest, WithTheQueueOffNothingWaits) {
  config_.max_queued = 0;
  ASSERT_TRUE(Arrive("a").ok());
  EXPECT_FALSE(queue_->MustWait(probe_));
}

TEST_F(StartQueueTest, HigherPrioritiesLeaveFirst) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("low", 0).ok());
  ASSERT_TRUE(Arrive("high", 5).ok());
  End("running");
  End("high");
  EXPECT_THAT(started_, ElementsAre("running:at once", "high:prompt-high", "low:prompt-low"));
}

TEST_F(StartQueueTest, AFullQueueRefusesOrShedsALowerPriority) {
  ASSERT_TRUE(Arrive("running").ok());
  for (const char* id : {"q1", "q2", "q3"}) ASSERT_TRUE(Arrive(id, 1).ok());
  absl::Status refused = Arrive("same", 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("the admission queue is full: 3 requests wait"));
  EXPECT_TRUE(RetryAfterOf(refused).has_value());
  // A higher priority takes the place of the newest of the lowest.
  ASSERT_TRUE(Arrive("urgent", 9).ok());
  EXPECT_THAT(failed_, ElementsAre("q3"));
  EXPECT_THAT(last_error_.message(), HasSubstr("shed from the full admission queue"));
  EXPECT_TRUE(queue_->order().Contains("urgent"));
}

TEST_F(StartQueueTest, AWaitPastTheLimitEndsTheRequest) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("waits").ok());
  scheduler_.AdvanceBy(absl::Seconds(9));
  EXPECT_THAT(failed_, IsEmpty());
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_THAT(failed_, ElementsAre("waits"));
  EXPECT_THAT(last_error_.message(), HasSubstr("in the admission queue (limits.max_queue_ms)"));
}

TEST_F(StartQueueTest, ARequestThatLeftTheQueueHasNoTimerLeft) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("waits").ok());
  End("running");
  scheduler_.AdvanceBy(absl::Seconds(30));
  EXPECT_THAT(failed_, IsEmpty());
  EXPECT_FALSE(table_.Find("waits")->queued);
}

TEST_F(StartQueueTest, NothingLeavesWhileHeld) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("next").ok());
  queue_->Hold();
  End("running");
  EXPECT_EQ(started_.size(), 1u);
  queue_->Release();
  EXPECT_THAT(started_, ElementsAre("running:at once", "next:prompt-next"));
}

TEST_F(StartQueueTest, ARequestBeingAbortedIsParkedUntilRequeued) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("held").ok());
  ASSERT_TRUE(Arrive("other").ok());
  InFlightRequest& held = *table_.Find("held");
  held.aborting = 1;
  End("running");
  // "held" is skipped (out of the queue, still queued); "other" takes the slot.
  EXPECT_THAT(started_, ElementsAre("running:at once", "other:prompt-other"));
  EXPECT_TRUE(held.queued);
  EXPECT_FALSE(queue_->order().Contains("held"));
  // The abort failed: it queues again and starts once a slot frees.
  held.aborting = 0;
  queue_->Requeue(held);
  EXPECT_TRUE(queue_->order().Contains("held"));
  End("other");
  EXPECT_THAT(started_, ElementsAre("running:at once", "other:prompt-other", "held:prompt-held"));
}

TEST_F(StartQueueTest, ADrainRefusesEveryQueuedRequest) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("a").ok());
  ASSERT_TRUE(Arrive("b").ok());
  v1::Error draining;
  draining.set_message("draining");
  queue_->RefuseAll(draining);
  EXPECT_THAT(failed_, ElementsAre("a", "b"));
  EXPECT_EQ(last_error_.message(), "draining");
  EXPECT_TRUE(queue_->order().empty());
}

TEST_F(StartQueueTest, AQueuedRequestsClientHearsItStarted) {
  ASSERT_TRUE(Arrive("running").ok());
  ASSERT_TRUE(Arrive("waits").ok());
  EXPECT_THAT(sink_->started(), ElementsAre("waits"));
}

}  // namespace
}  // namespace omnistage
