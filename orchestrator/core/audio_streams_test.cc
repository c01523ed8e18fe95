// AudioStreams over a table of requests whose audio the test delivers: what a
// sample measures, the capacity it finds, and when admission holds a request
// that wants audio.
#include "orchestrator/core/audio_streams.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "common/testing/manual_scheduler.h"
#include "gtest/gtest.h"
#include "orchestrator/core/generate_request.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/testing/fake_response_sink.h"
#include "orchestrator/core/testing/silent_audio.h"

namespace omnistage {
namespace {

class AudioStreamsTest : public ::testing::Test {
 protected:
  AudioStreamsTest() {
    config_.stages.resize(2);
    config_.stages[0].name = "talker";
    config_.stages[0].output_modality = v1::MODALITY_TOKENS;
    config_.stages[1].name = "vocoder";
    config_.stages[1].output_modality = v1::MODALITY_AUDIO;
    config_.stages[1].final_output = true;
  }

  // A request in flight whose client gets audio (or not).
  InFlightRequest& Request(const std::string& id, bool audio = true) {
    auto r = std::make_unique<InFlightRequest>();
    r->id = id;
    r->to_client = {false, audio};
    r->wants_audio = audio;
    r->account = RequestAccount(scheduler_.Now());
    return *table_.Add(std::move(r));
  }

  // `streams` requests play for a second, each getting the audio a pipeline
  // of y = 0.3 + 0.01125 N wall seconds per audio second makes; then they end.
  void Round(int streams) {
    std::vector<std::string> ids;
    for (int i = 0; i < streams; ++i) {
      ids.push_back(absl::StrCat("round", rounds_, "-", i));
      Request(ids.back()).account.Delivered(SilentAudio(0.04), scheduler_.Now());
    }
    audio_.Sample();
    scheduler_.AdvanceBy(absl::Seconds(1));
    for (const std::string& id : ids) {
      table_.Find(id)->account.Delivered(SilentAudio(1 / (0.3 + 0.01125 * streams)),
                                         scheduler_.Now());
    }
    audio_.Sample();
    for (const std::string& id : ids) table_.Remove(id);
    ++rounds_;
  }

  PipelineConfig config_;
  ManualScheduler scheduler_;
  RequestTable table_{&scheduler_};
  MetricsRegistry registry_;
  PipelineMetrics metrics_{&registry_, {"talker", "vocoder"}};
  std::vector<std::shared_ptr<StagePool>> pools_;
  AudioStreams audio_{CoreParts{&config_, &table_, &pools_, &metrics_, &scheduler_}};
  int rounds_ = 0;
};

TEST_F(AudioStreamsTest, ASampleMeasuresTheRequestsThatPlayedThroughIt) {
  Request("text-only", /*audio=*/false);
  Round(8);
  const v1::AudioCapacityStatus status = audio_.Status();
  EXPECT_EQ(status.playing(), 8);
  EXPECT_NEAR(status.seconds_per_audio_second(), 0.39, 1e-3);
  EXPECT_FALSE(status.capacity_known());  // One number of streams: no slope yet.
}

TEST_F(AudioStreamsTest, FindsTheCapacityAndHoldsAudioRequestsPastItsShare) {
  for (int streams : {2, 4, 8, 16, 24}) Round(streams);
  v1::AudioCapacityStatus status = audio_.Status();
  ASSERT_TRUE(status.capacity_known());
  EXPECT_NEAR(status.capacity_streams(), 0.7 / 0.01125, 0.5);
  EXPECT_EQ(status.admission_limit(), 0);  // Off by default.
  for (int i = 0; i < 5; ++i) Request(absl::StrCat("running", i));
  EXPECT_FALSE(audio_.Full());

  config_.playback.audio_admission_percent = 10;  // 6 streams.
  EXPECT_EQ(audio_.Status().admission_limit(), 6);
  InFlightRequest& arriving = Request("arriving");
  EXPECT_FALSE(audio_.Full(&arriving));  // 5 run besides it.
  EXPECT_TRUE(audio_.Full());            // With it, 6.
  table_.SetQueued(arriving, true);      // Waiting in the queue: not running.
  EXPECT_FALSE(audio_.Full());
  Request("text", /*audio=*/false);  // Counts nothing.
  EXPECT_FALSE(audio_.Full());
}

// A request wants audio when an audio stage streams to its client: the
// pipeline's, unless it asked for other modalities only.
TEST_F(AudioStreamsTest, ARequestWantsAudioWhenAnAudioStageStreamsToItsClient) {
  v1::GenerateRequest request;
  request.set_prompt("Hi");
  auto sink = std::make_shared<FakeResponseSink>();
  EXPECT_TRUE(NewInFlightRequest(config_, request, "a", sink, scheduler_.Now())->wants_audio);
  request.add_output_modalities(v1::MODALITY_TEXT);
  EXPECT_FALSE(NewInFlightRequest(config_, request, "t", sink, scheduler_.Now())->wants_audio);
  request.add_output_modalities(v1::MODALITY_AUDIO);
  EXPECT_TRUE(NewInFlightRequest(config_, request, "b", sink, scheduler_.Now())->wants_audio);
}

TEST_F(AudioStreamsTest, OneAudioRequestMayAlwaysRun) {
  for (int streams : {1, 2, 3, 4, 5}) Round(streams);
  config_.playback.audio_admission_percent = 1;  // Under one stream.
  EXPECT_EQ(audio_.Status().admission_limit(), 1);
  EXPECT_FALSE(audio_.Full());
  Request("one");
  EXPECT_TRUE(audio_.Full());
}

// Admission by audio capacity next to stages whose requests sit out while
// ahead of their listeners: the capacity would be measured too low, and the
// orchestrator says so as it starts.
TEST_F(AudioStreamsTest, WarnsWhenAStageLetsRequestsAheadSitOut) {
  config_.playback.audio_admission_percent = 85;
  config_.stages[1].engine_params["playback_lead_ms"] = "500";
  ::testing::internal::CaptureStderr();
  { AudioStreams audio(CoreParts{&config_, &table_, &pools_, &metrics_, &scheduler_}); }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("stage vocoder has engine_params.playback_lead_ms 500"), std::string::npos)
      << said;

  config_.stages[1].engine_params["playback_lead_ms"] = "0";  // off
  ::testing::internal::CaptureStderr();
  { AudioStreams audio(CoreParts{&config_, &table_, &pools_, &metrics_, &scheduler_}); }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace omnistage
