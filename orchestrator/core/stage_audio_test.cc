// StageAudio over a table of requests whose stages' output the test counts:
// what each stage learns from a completed request, the capacity a stage's
// samples give per replica, and the audio streams asking for it.
#include "orchestrator/core/stage_audio.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "common/testing/manual_scheduler.h"
#include "gtest/gtest.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/testing/silent_audio.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace {

v1::Terminal Ending(v1::FinishReason reason) {
  v1::Terminal terminal;
  terminal.set_finish_reason(reason);
  return terminal;
}

// A talker (one replica, codes as tokens) then a vocoder (two replicas,
// audio to the client).
class StageAudioTest : public ::testing::Test {
 protected:
  StageAudioTest() {
    config_.stages.resize(2);
    config_.stages[0].name = "talker";
    config_.stages[0].output_modality = v1::MODALITY_TOKENS;
    config_.stages[1].name = "vocoder";
    config_.stages[1].output_modality = v1::MODALITY_AUDIO;
    config_.stages[1].final_output = true;
    pools_.push_back(std::make_shared<StagePool>(0, std::vector<ReplicaClient*>{&talker_}));
    pools_.push_back(
        std::make_shared<StagePool>(1, std::vector<ReplicaClient*>{&vocoder_a_, &vocoder_b_}));
    stages_ =
        std::make_unique<StageAudio>(CoreParts{&config_, &table_, &pools_, &metrics_, &scheduler_});
  }

  // A request in flight whose client gets audio (or not), started on
  // `stages` of the two.
  InFlightRequest& Request(const std::string& id, int stages = 2, bool audio = true) {
    auto r = std::make_unique<InFlightRequest>();
    r->id = id;
    r->to_client = {false, audio};
    r->wants_audio = audio;
    r->account = RequestAccount(scheduler_.Now());
    r->stages.resize(2);
    for (int s = 0; s < stages; ++s) r->stages[s].started = true;
    return *table_.Add(std::move(r));
  }

  // A request that completed: the talker made 100 codes for 8 s of audio.
  void Completed(const std::string& id, v1::FinishReason reason = v1::FINISH_REASON_STOP) {
    InFlightRequest& r = Request(id);
    r.stages[0].produced = 100;
    r.stages[1].produced = 8;
    r.account.Delivered(SilentAudio(8), scheduler_.Now());
    stages_->Ended(r, Ending(reason));
    table_.Remove(id);
  }

  // `streams` requests produce on both stages for a second: per stream, the
  // talker at y = 0.2 + 0.02 N wall seconds per audio second (N its streams),
  // the vocoder at y = 0.1 + 0.01 N (N its streams per replica); then they
  // end.
  void Round(int streams) {
    std::vector<std::string> ids;
    for (int i = 0; i < streams; ++i) {
      ids.push_back(absl::StrCat("round", rounds_, "-", i));
      InFlightRequest& r = Request(ids.back());
      r.stages[0].produced = 1;
      r.stages[1].produced = 0.04;
    }
    stages_->Sample();
    scheduler_.AdvanceBy(absl::Seconds(1));
    for (const std::string& id : ids) {
      InFlightRequest& r = *table_.Find(id);
      // 0.08 s of audio a code.
      r.stages[0].produced += 1 / (0.2 + 0.02 * streams) / 0.08;
      r.stages[1].produced += 1 / (0.1 + 0.01 * streams / 2.0);
    }
    stages_->Sample();
    for (const std::string& id : ids) table_.Remove(id);
    ++rounds_;
  }

  PipelineConfig config_;
  ManualScheduler scheduler_;
  RequestTable table_{&scheduler_};
  MetricsRegistry registry_;
  PipelineMetrics metrics_{&registry_, {"talker", "vocoder"}};
  std::vector<std::string> log_;
  FakeReplicaClient talker_{"T", &log_};
  FakeReplicaClient vocoder_a_{"A", &log_};
  FakeReplicaClient vocoder_b_{"B", &log_};
  std::vector<std::shared_ptr<StagePool>> pools_;
  std::unique_ptr<StageAudio> stages_;
  int rounds_ = 0;
};

TEST_F(StageAudioTest, CountsEachKindOfOutputInItsOwnUnits) {
  v1::Payload text;
  text.mutable_text()->set_text("Hello");
  EXPECT_EQ(StageAudio::Units(text), 5);
  v1::Payload tokens;
  tokens.mutable_tokens()->add_ids(7);
  tokens.mutable_tokens()->add_ids(8);
  EXPECT_EQ(StageAudio::Units(tokens), 2);
  EXPECT_NEAR(StageAudio::Units(SilentAudio(0.5)), 0.5, 1e-9);
  v1::Payload raw;
  raw.set_raw("abc");
  EXPECT_EQ(StageAudio::Units(raw), 3);
  EXPECT_EQ(StageAudio::Units(v1::Payload()), 0);
}

TEST_F(StageAudioTest, UnknownUntilACompletedRequestSaysWhatAUnitComesTo) {
  for (int streams : {2, 4, 8, 16}) Round(streams);
  EXPECT_FALSE(stages_->Load(0).per_replica.has_value());
  EXPECT_FALSE(stages_->Load(1).per_replica.has_value());
  // An aborted request's stages stopped part way; a text request has no audio.
  Completed("aborted", v1::FINISH_REASON_ABORT);
  Completed("failed", v1::FINISH_REASON_ERROR);
  Request("text", 2, /*audio=*/false);
  for (int streams : {2, 4, 8, 16}) Round(streams);
  EXPECT_FALSE(stages_->Load(0).per_replica.has_value());
}

TEST_F(StageAudioTest, FindsEachStagesStreamsPerReplica) {
  Completed("taught");
  for (int streams : {2, 4, 8, 16, 24}) Round(streams);
  // The talker crosses real time at (1 - 0.2) / 0.02 = 40 streams on its one
  // replica; the vocoder at (1 - 0.1) / 0.01 = 90 on each of its two.
  ASSERT_TRUE(stages_->Load(0).per_replica.has_value());
  EXPECT_NEAR(*stages_->Load(0).per_replica, 40, 0.5);
  ASSERT_TRUE(stages_->Load(1).per_replica.has_value());
  EXPECT_NEAR(*stages_->Load(1).per_replica, 90, 1);
}

TEST_F(StageAudioTest, ARequestCountsOnceItProducesThroughAWholeInterval) {
  Completed("taught");
  InFlightRequest& starting = Request("starting", /*stages=*/1);  // Not producing yet.
  InFlightRequest& text = Request("text", 2, /*audio=*/false);
  text.stages[0].produced = 50;
  stages_->Sample();
  EXPECT_EQ(stages_->Load(0).requests, 1);  // Held, but not producing.
  EXPECT_EQ(stages_->Load(1).requests, 0);
  starting.stages[0].produced = 10;
  text.stages[0].produced = 100;
  scheduler_.AdvanceBy(absl::Seconds(1));
  stages_->Sample();  // It began within the interval: nothing measured.
  EXPECT_FALSE(stages_->Load(0).per_replica.has_value());
  starting.stages[0].finished = true;
  stages_->Sample();
  EXPECT_EQ(stages_->Load(0).requests, 0);
}

// The audio requests in the admission queue ask for every stage, in the
// shares the running ones hold them.
TEST_F(StageAudioTest, OffersEachStageItsShareOfTheQueue) {
  Request("both-1");
  Request("both-2");
  Request("talker-only", /*stages=*/1);
  Request("text", 2, /*audio=*/false);
  for (int i = 0; i < 3; ++i) table_.SetQueued(Request(absl::StrCat("queued", i), 0), true);
  stages_->Sample();
  EXPECT_EQ(stages_->Load(0).requests, 3);
  EXPECT_NEAR(stages_->Load(0).offered, 3 + 3 * 3 / 3.0, 1e-9);
  EXPECT_EQ(stages_->Load(1).requests, 2);
  EXPECT_NEAR(stages_->Load(1).offered, 2 + 3 * 2 / 3.0, 1e-9);
}

TEST_F(StageAudioTest, WithNothingRunningTheQueueAsksForTheFirstStage) {
  for (int i = 0; i < 2; ++i) table_.SetQueued(Request(absl::StrCat("queued", i), 0), true);
  stages_->Sample();
  EXPECT_NEAR(stages_->Load(0).offered, 2, 1e-9);
  EXPECT_NEAR(stages_->Load(1).offered, 0, 1e-9);
}

}  // namespace
}  // namespace omnistage
