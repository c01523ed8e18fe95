// Each stage's autoscaling signal from PipelineCore, over fakes and a manual
// clock: a steady stream of requests whose stages take 1 s, 3 s and 1 s gives
// the talker three times the thinker's demand, in the status and the
// metrics; the admission queue counts as what waits for stage 0; requests
// shorter than a sample are measured; when the requests stop the counts
// come back to one replica each; and going idle is heard once per idle period.
#include <cmath>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/testing/pipeline_core_harness.h"
#include "orchestrator/core/testing/silent_audio.h"

namespace omnistage {
namespace pipeline_core_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PipelineCoreScalingTest : public PipelineCoreTest {
 protected:
  void SetUp() override {
    PipelineConfig config = OmniConfig(
        Shape().Talkers(3).TalkerInput(InputMode::kOnFinish).VocoderInput(InputMode::kOnFinish));
    config.scaling.window = absl::Seconds(10);
    config.scaling.sample_interval = absl::Seconds(1);
    config.max_in_flight = 1000;
    Build(std::move(config));
  }

  // `seconds` of `per_second` new requests a second; a request spends 1 s on
  // the thinker, 3 s on the talker and 1 s on the vocoder (every replica
  // reports 8 slots).
  void Stream(int per_second, int seconds) {
    for (int t = 0; t < seconds; ++t) {
      for (int i = 0; i < per_second; ++i) {
        const std::string id = absl::StrCat("r", next_++);
        Gen(id);
        started_.push_back({id, 0});
      }
      scheduler_.AdvanceBy(absl::Seconds(1));
      Age();
    }
  }
  void Drain(int seconds) { Stream(0, seconds); }

  const v1::StageScaling Scaling(int stage) { return core().Status().stages(stage).scaling(); }

 private:
  struct Running {
    std::string id;
    int age = 0;
  };
  void Age() {
    for (Running& r : started_) {
      ++r.age;
      if (r.age == 1) Done(0, 0, r.id, {Text("Hello")});
      if (r.age == 4) Done(1, *core().pool(1).Bound(r.id), r.id, {Codes({1, 2})});
      if (r.age == 5) Done(2, 0, r.id, {Audio("ab")});
    }
    while (!started_.empty() && started_.front().age >= 5) started_.pop_front();
  }

  std::deque<Running> started_;
  int next_ = 0;
};

// 2 requests a second: 2 slots busy on the thinker and the vocoder, 6 on the
// talker; at 80% of 8 slots, 0.3125 and 0.9375 replicas.
TEST_F(PipelineCoreScalingTest, EachStageAsksForItsShareOfTheDemand) {
  Stream(2, 60);
  const v1::StageScaling thinker = Scaling(0), talker = Scaling(1), vocoder = Scaling(2);
  EXPECT_NEAR(thinker.arrivals_per_second(), 2, 0.05);
  EXPECT_NEAR(thinker.slot_seconds_per_request(), 1, 0.05);
  EXPECT_NEAR(talker.slot_seconds_per_request(), 3, 0.15);
  EXPECT_NEAR(thinker.demand_replicas(), 2.0 / 6.4, 0.02);
  EXPECT_NEAR(talker.demand_replicas(), 6.0 / 6.4, 0.05);
  EXPECT_NEAR(vocoder.demand_replicas(), 2.0 / 6.4, 0.02);
  EXPECT_NEAR(talker.demand_replicas() / thinker.demand_replicas(), 3, 0.15);
  EXPECT_EQ(talker.recommended_replicas(), 1);
  EXPECT_EQ(talker.live_replicas(), 3);
  EXPECT_EQ(talker.capacity(), 24);
  // Sampled at a second's end: the talker holds the last three seconds' six.
  EXPECT_EQ(talker.held_requests(), 6);
  EXPECT_DOUBLE_EQ(talker.saturation(), 6.0 / 24);

  core().SnapshotMetrics();
  const std::string text = core().metrics_registry().Render();
  EXPECT_THAT(text, HasSubstr("omnistage_stage_saturation{stage=\"talker\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_stage_recommended_replicas{stage=\"talker\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("omnistage_stage_demand_replicas{stage=\"thinker\"} 0.3"));
  Drain(6);
}

// 6 requests a second need 18 talker slots: 2.8 replicas of 8 at 80%, so 3;
// the thinker's 6 slots fit one. (The fakes run whatever they are sent, so
// no stage here holds more than its slots: stage_demand_test has a stage
// short of replicas.)
TEST_F(PipelineCoreScalingTest, MoreLoadThanOneReplicaTakesAsksForMore) {
  Stream(6, 60);
  EXPECT_EQ(Scaling(0).recommended_replicas(), 1);
  EXPECT_EQ(Scaling(1).recommended_replicas(), 3);
  EXPECT_EQ(Scaling(1).held_requests(), 18);
  EXPECT_EQ(Scaling(1).waiting_requests(), 0);
  EXPECT_DOUBLE_EQ(Scaling(1).saturation(), 18.0 / 24);
  // When the requests stop, every stage comes back to one replica.
  Drain(60);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(Scaling(s).recommended_replicas(), 1) << "stage " << s;
    EXPECT_LT(Scaling(s).demand_replicas(), 0.05) << "stage " << s;
  }
}

// Requests waiting in the admission queue wait for stage 0.
TEST_F(PipelineCoreScalingTest, TheAdmissionQueueWaitsForStageZero) {
  // 8 slots + 2 headroom take 10; the other 5 queue.
  for (int i = 0; i < 15; ++i) Gen(absl::StrCat("q", i));
  scheduler_.AdvanceBy(absl::Seconds(1));
  EXPECT_EQ(Scaling(0).held_requests(), 8);
  EXPECT_EQ(Scaling(0).waiting_requests(), 2 + 5);
  EXPECT_DOUBLE_EQ(Scaling(0).saturation(), 15.0 / 8);
  // Nothing has left stage 0 yet: it asks for what it holds and what waits.
  EXPECT_EQ(Scaling(0).recommended_replicas(), 3);
  LeaveOpen("the requests stay queued and running");
}

// Requests that start and end between two samples still count: the slots
// they held are measured at every change, not sampled.
TEST_F(PipelineCoreScalingTest, RequestsShorterThanASampleAreMeasured) {
  for (int t = 0; t < 60; ++t) {
    const std::string id = absl::StrCat("short", t);
    scheduler_.AdvanceBy(absl::Milliseconds(100));
    Gen(id);
    scheduler_.AdvanceBy(absl::Milliseconds(300));
    Done(0, 0, id, {Text("Hello")});
    scheduler_.AdvanceBy(absl::Milliseconds(200));
    Done(1, *core().pool(1).Bound(id), id, {Codes({1, 2})});
    scheduler_.AdvanceBy(absl::Milliseconds(100));
    Done(2, 0, id, {Audio("ab")});
    scheduler_.AdvanceBy(absl::Milliseconds(300));
  }
  EXPECT_NEAR(Scaling(0).slot_seconds_per_request(), 0.3, 0.03);
  EXPECT_NEAR(Scaling(1).slot_seconds_per_request(), 0.2, 0.02);
  EXPECT_NEAR(Scaling(2).slot_seconds_per_request(), 0.1, 0.01);
  EXPECT_NEAR(Scaling(0).arrivals_per_second(), 1, 0.05);
  EXPECT_EQ(Scaling(0).held_requests(), 0);
}

// The core says when it goes idle, once per idle period (at the first sample
// with nothing in flight and nothing admitted since the one before), never
// while requests run.
TEST_F(PipelineCoreScalingTest, GoingIdleIsHeardOncePerIdlePeriod) {
  int heard = 0;
  core().set_on_idle([&heard] { ++heard; });
  Stream(2, 10);
  EXPECT_EQ(heard, 0);
  Drain(4);  // The last requests end.
  EXPECT_EQ(heard, 0);
  Drain(3);
  EXPECT_EQ(heard, 1);
  Drain(30);
  EXPECT_EQ(heard, 1);
  Stream(1, 1);
  Drain(10);
  EXPECT_EQ(heard, 2);
}

// The value of the series `series` in the metrics `text`; NaN when absent.
double Gauge(const std::string& text, const std::string& series) {
  const size_t at = text.find(absl::StrCat("\n", series, " "));
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

// Audio through the core, over fakes: the talker makes codes at a pace that
// falls with the streams each of its two replicas holds, and the vocoder (two
// replicas, fed by it) turns each code into 0.02 s of audio as it comes.
class PipelineCoreAudioScalingTest : public PipelineCoreTest {
 protected:
  void SetUp() override {
    PipelineConfig config = OmniConfig(Shape().Talkers(2).Vocoders(2));
    config.scaling.window = absl::Seconds(30);
    config.scaling.sample_interval = absl::Seconds(1);
    config.max_in_flight = 1000;
    Build(std::move(config));
  }

  const v1::StageScaling Scaling(int stage) { return core().Status().stages(stage).scaling(); }

  // `seconds` of `per_second` new requests a second. A request's thinker
  // ends in its first second; then for 5 s its talker makes codes and its
  // vocoder the audio: each stream at y = 0.2 + 0.16 x wall seconds per
  // second of audio, x the streams per replica, so 5 per replica at real time.
  void Stream(int per_second, int seconds) {
    for (int t = 0; t < seconds; ++t) {
      for (int i = 0; i < per_second; ++i) {
        const std::string id = absl::StrCat("a", next_++);
        Gen(id);
        started_.push_back({id, 0});
      }
      scheduler_.AdvanceBy(absl::Seconds(1));
      Age();
    }
  }

 private:
  struct Running {
    std::string id;
    int age = 0;
  };

  void Age() {
    // Ages 2 to 5 produce and go on; age 6 produces its last.
    int producing = 0;
    for (Running& r : started_) producing += ++r.age >= 2 && r.age <= 5 ? 1 : 0;
    const double y = 0.2 + 0.16 * producing / 2;
    const int codes = static_cast<int>(std::lround(50 / y));  // 0.02 s of audio each.
    for (Running& r : started_) {
      if (r.age == 1) Done(0, 0, r.id, {Text("Hello")});
      if (r.age < 2 || r.age > 6) continue;
      const bool last = r.age == 6;
      Out(1, *core().pool(1).Bound(r.id), r.id, {Codes(std::vector<int32_t>(codes, 7))}, last);
      Out(2, *core().pool(2).Bound(r.id), r.id,
          {SilentAudio(codes * 0.02, /*sample_rate_hz=*/1000)}, last);
    }
    while (!started_.empty() && started_.front().age >= 6) started_.pop_front();
  }

  std::deque<Running> started_;
  int next_ = 0;
};

// At 1, 2, 3 and 4 new requests a second the talker's replicas hold 2 to 8
// streams each; it holds 5 a replica at real time, 10 on its two. The
// vocoder, fed by it, measures the same and does not limit; the thinker,
// whose requests never produce through a whole interval, measures nothing.
// 4 a second keep 16 streams producing on the talker (and 4 starting): at
// 80% of 5 a replica, 5 replicas, more than its slots ask for.
TEST_F(PipelineCoreAudioScalingTest, TheTalkerLimitsAndAsksForReplicasByItsStreams) {
  for (int per_second : {1, 2, 3, 4}) Stream(per_second, 15);
  const v1::StageScaling thinker = Scaling(0), talker = Scaling(1), vocoder = Scaling(2);
  EXPECT_FALSE(thinker.audio_capacity_known());
  ASSERT_TRUE(talker.audio_capacity_known());
  EXPECT_NEAR(talker.audio_stream_capacity(), 10, 0.5);
  EXPECT_TRUE(talker.audio_limited());
  EXPECT_EQ(talker.audio_requests(), 20);
  EXPECT_NEAR(talker.audio_demand_replicas(), 20 / (5 * 0.8), 0.3);
  EXPECT_LT(talker.demand_replicas(), 4);
  EXPECT_EQ(talker.recommended_replicas(), 5);
  ASSERT_TRUE(vocoder.audio_capacity_known());
  EXPECT_NEAR(vocoder.audio_stream_capacity(), 10, 0.5);
  EXPECT_FALSE(vocoder.audio_limited());

  core().SnapshotMetrics();
  const std::string text = core().metrics_registry().Render();
  EXPECT_NEAR(Gauge(text, "omnistage_stage_audio_stream_capacity{stage=\"talker\"}"), 10, 0.5);
  EXPECT_NEAR(Gauge(text, "omnistage_stage_audio_demand_replicas{stage=\"talker\"}"), 5, 0.3);
  EXPECT_THAT(text, HasSubstr("omnistage_stage_audio_demand_replicas{stage=\"vocoder\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("omnistage_stage_audio_stream_capacity{stage=\"thinker\"}")));
  Stream(0, 10);
}

}  // namespace
}  // namespace pipeline_core_test
}  // namespace omnistage
