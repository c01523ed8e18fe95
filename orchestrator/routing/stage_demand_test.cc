#include "orchestrator/routing/stage_demand.h"

#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// A pipeline in a steady state, one sample a second: the clients send
// `arrivals` requests a second; stage s takes in entries[s] a second (as many
// leave) and keeps occupied[s] slots busy, on `replicas[s]` replicas of
// `slots` slots each.
struct Steady {
  double arrivals = 0;
  std::vector<double> entries;
  std::vector<int> occupied;
  std::vector<int> waiting;
  std::vector<int> replicas;
  int slots = 4;
  // Per stage, when set.
  std::vector<StageAudioLoad> audio = {};
};

class Pipeline {
 public:
  explicit Pipeline(int stages, DemandOptions options = {})
      : demand_(stages, options), entered_(stages, 0), busy_(stages, 0) {}

  void Run(const Steady& steady, int seconds) {
    for (int i = 0; i < seconds; ++i) {
      now_ += absl::Seconds(1);
      arrived_ += steady.arrivals;
      std::vector<StageLoad> loads;
      for (size_t s = 0; s < entered_.size(); ++s) {
        entered_[s] += steady.entries[s];
        busy_[s] += steady.occupied[s];  // for the second just past
        StageLoad load;
        load.held = steady.occupied[s];
        load.waiting = steady.waiting.empty() ? 0 : steady.waiting[s];
        load.live_replicas = steady.replicas[s];
        load.capacity = steady.replicas[s] * steady.slots;
        load.slots_per_replica = steady.slots;
        load.entries = static_cast<uint64_t>(entered_[s]);
        // Those inside now left; the rest have.
        load.departures = load.entries - steady.occupied[s] - load.waiting;
        load.busy_slot_seconds = busy_[s];
        if (!steady.audio.empty()) load.audio = steady.audio[s];
        loads.push_back(load);
      }
      demand_.Sample(now_, static_cast<uint64_t>(arrived_), loads);
    }
  }
  const v1::StageScaling& operator[](int stage) const { return demand_.Signal(stage); }

 private:
  StageDemand demand_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  double arrived_ = 0;
  std::vector<double> entered_;
  std::vector<double> busy_;
};

TEST(StageDemandTest, NothingMeasuredYetRecommendsOneReplicaEach) {
  StageDemand demand(2, {});
  EXPECT_EQ(demand.Signal(0).recommended_replicas(), 1);
  EXPECT_EQ(demand.Signal(1).demand_replicas(), 0);
}

// 20 requests a second; a request holds a slot 0.2 s on stage 0 and 0.6 s on
// stage 1: 4 and 12 busy slots, at 80% of 4 slots per replica 1.25 and 3.75
// replicas. The ratio between the stages is the ratio of their slot times.
TEST(StageDemandTest, SteadyLoadAsksForEachStagesShare) {
  Pipeline pipeline(2);
  pipeline.Run({20, {20, 20}, {4, 12}, {}, {2, 4}}, 300);
  EXPECT_NEAR(pipeline[0].arrivals_per_second(), 20, 0.01);
  EXPECT_NEAR(pipeline[0].slot_seconds_per_request(), 0.2, 0.001);
  EXPECT_NEAR(pipeline[1].slot_seconds_per_request(), 0.6, 0.001);
  EXPECT_NEAR(pipeline[0].demand_replicas(), 1.25, 0.01);
  EXPECT_NEAR(pipeline[1].demand_replicas(), 3.75, 0.01);
  EXPECT_EQ(pipeline[0].recommended_replicas(), 2);
  EXPECT_EQ(pipeline[1].recommended_replicas(), 4);
  EXPECT_EQ(pipeline[1].held_requests(), 12);
  EXPECT_EQ(pipeline[1].capacity(), 16);
  EXPECT_DOUBLE_EQ(pipeline[1].saturation(), 0.75);
}

// Stage 0 is the bottleneck: one replica of 4 slots gets 10 requests a
// second through while the clients send 20 (the rest wait in the admission
// queue), so stage 1 sees only 10. Both stages still ask for what 20 need,
// in the same 1:3 ratio: scaling stage 0 alone would only move the
// bottleneck.
TEST(StageDemandTest, ABottleneckUpstreamDoesNotHideDemandDownstream) {
  Pipeline pipeline(2);
  pipeline.Run({20, {10, 10}, {4, 4}, {30, 2}, {1, 1}}, 300);
  EXPECT_NEAR(pipeline[0].slot_seconds_per_request(), 0.4, 0.01);
  EXPECT_NEAR(pipeline[1].arrivals_per_second(), 20, 0.1);
  // 20/s x 0.4 s = 8 slots of 3.2 per replica.
  EXPECT_NEAR(pipeline[0].demand_replicas(), 2.5, 0.05);
  EXPECT_EQ(pipeline[0].recommended_replicas(), 3);
  EXPECT_NEAR(pipeline[0].saturation(), 34.0 / 4, 1e-9);
  EXPECT_EQ(pipeline[0].waiting_requests(), 30);
  // Stage 1 holds 4 slots for requests leaving at 10/s: 0.4 s each.
  EXPECT_NEAR(pipeline[1].demand_replicas(), 2.5, 0.05);
}

// A stage that has not seen a request leave yet (all still running) asks for
// what it holds and what waits for it.
TEST(StageDemandTest, BeforeAnyRequestLeavesItAsksForWhatItHolds) {
  StageDemand demand(1, {});
  StageLoad load;
  load.held = 4;
  load.waiting = 4;
  load.capacity = 4;
  load.live_replicas = 1;
  load.slots_per_replica = 4;
  load.entries = 8;
  demand.Sample(absl::FromUnixSeconds(1), 8, {load});
  demand.Sample(absl::FromUnixSeconds(2), 8, {load});
  // 8 requests at 80% of 4 slots: 2.5 replicas.
  EXPECT_NEAR(demand.Signal(0).demand_replicas(), 2.5, 1e-9);
  EXPECT_EQ(demand.Signal(0).recommended_replicas(), 3);
  EXPECT_DOUBLE_EQ(demand.Signal(0).saturation(), 2);
}

// When the load goes away the count follows it down, within a few windows,
// to one replica.
TEST(StageDemandTest, ShrinksWhenTheLoadGoes) {
  Pipeline pipeline(2, {0.8, absl::Seconds(10)});
  pipeline.Run({20, {20, 20}, {4, 12}, {}, {2, 4}}, 100);
  EXPECT_EQ(pipeline[1].recommended_replicas(), 4);
  pipeline.Run({5, {5, 5}, {1, 3}, {}, {2, 4}}, 100);
  EXPECT_NEAR(pipeline[1].demand_replicas(), 3.0 / 3.2, 0.01);
  EXPECT_EQ(pipeline[1].recommended_replicas(), 1);
  pipeline.Run({0, {0, 0}, {0, 0}, {}, {2, 4}}, 200);
  EXPECT_LT(pipeline[0].demand_replicas(), 0.01);
  EXPECT_EQ(pipeline[0].recommended_replicas(), 1);
  EXPECT_EQ(pipeline[1].recommended_replicas(), 1);
}

// A higher target utilization packs the same demand into fewer replicas.
TEST(StageDemandTest, TargetUtilizationScalesTheCount) {
  Pipeline relaxed(1, {0.5, absl::Seconds(30)});
  Pipeline packed(1, {1.0, absl::Seconds(30)});
  relaxed.Run({20, {20}, {8}, {}, {2}}, 300);
  packed.Run({20, {20}, {8}, {}, {2}}, 300);
  EXPECT_NEAR(relaxed[0].demand_replicas(), 4, 0.01);
  EXPECT_NEAR(packed[0].demand_replicas(), 2, 0.01);
  EXPECT_EQ(packed[0].recommended_replicas(), 2);
}

// With no capacity reported, saturation is what the stage is asked to hold.
TEST(StageDemandTest, SaturationWithoutCapacityIsTheRequestCount) {
  StageDemand demand(1, {});
  StageLoad load;
  load.held = 3;
  load.waiting = 2;
  demand.Sample(absl::FromUnixSeconds(1), 0, {load});
  EXPECT_DOUBLE_EQ(demand.Signal(0).saturation(), 5);
}

// While the load grows the busy slots trail the requests entering and lead
// those leaving: measured against their mean, the slot time is not
// overstated (a ramp of 1 more request a second each second, 2 s a request:
// 10 s in, against the requests leaving alone it would read 2.19 s, and an
// autoscaler would overshoot).
TEST(StageDemandTest, AGrowingLoadIsNotCreditedWithLongerSlotTimes) {
  StageDemand demand(1, {0.8, absl::Seconds(5)});
  double entered = 0, left = 0, busy = 0;
  for (int t = 1; t <= 30; ++t) {
    // Arrivals at rate t; each leaves 2 s later; t - 1 to t busy slots.
    entered += t;
    if (t > 2) left += t - 2;
    busy += t >= 2 ? 2.0 * t - 3 : 0.5;
    StageLoad load;
    load.entries = static_cast<uint64_t>(entered);
    load.departures = static_cast<uint64_t>(left);
    load.busy_slot_seconds = busy;
    load.held = static_cast<int>(entered - left);
    load.slots_per_replica = 4;
    demand.Sample(absl::FromUnixSeconds(t), static_cast<uint64_t>(entered), {load});
    if (t == 10) {
      EXPECT_GT(demand.Signal(0).slot_seconds_per_request(), 1.8);
      EXPECT_LT(demand.Signal(0).slot_seconds_per_request(), 2.0);
    }
  }
  EXPECT_NEAR(demand.Signal(0).slot_seconds_per_request(), 2, 0.05);
}

// Audio streams in a thinker -> talker -> vocoder pipeline of 32-slot
// replicas, whose slots are far from full: the talker makes audio for 20
// streams at real time, and 30 ask for it. The vocoder, fed by the talker,
// measures about the same; the thinker, far more than its slots.
Steady AudioPipeline() {
  Steady steady{1, {1, 1, 1}, {2, 25, 25}, {}, {1, 1, 1}, 32};
  steady.audio = {{2, 30, 200.0}, {25, 30, 20.0}, {25, 30, 21.0}};
  return steady;
}

TEST(StageDemandTest, TheStageThatLimitsAudioAsksForReplicasByItsStreams) {
  Pipeline pipeline(3);
  pipeline.Run(AudioPipeline(), 60);
  EXPECT_EQ(pipeline[1].audio_requests(), 25);
  ASSERT_TRUE(pipeline[1].audio_capacity_known());
  EXPECT_DOUBLE_EQ(pipeline[1].audio_stream_capacity(), 20);
  // 30 streams at 80% of 20 a replica.
  EXPECT_NEAR(pipeline[1].audio_demand_replicas(), 1.875, 1e-9);
  EXPECT_TRUE(pipeline[1].audio_limited());
  EXPECT_LT(pipeline[1].demand_replicas(), 1);  // Its slots alone ask for one.
  EXPECT_EQ(pipeline[1].recommended_replicas(), 2);
  // Within 10% of the talker, after it: fed by it, not limiting.
  EXPECT_DOUBLE_EQ(pipeline[2].audio_stream_capacity(), 21);
  EXPECT_FALSE(pipeline[2].audio_limited());
  EXPECT_EQ(pipeline[2].recommended_replicas(), 1);
  // A replica holds no more streams than its slots.
  EXPECT_DOUBLE_EQ(pipeline[0].audio_stream_capacity(), 32);
  EXPECT_FALSE(pipeline[0].audio_limited());
  EXPECT_EQ(pipeline[0].recommended_replicas(), 1);
}

TEST(StageDemandTest, AStageWellBelowTheOnesBeforeItLimitsAudio) {
  Steady steady = AudioPipeline();
  steady.audio[2].per_replica = 8.0;
  steady.replicas = {1, 1, 2};
  Pipeline pipeline(3);
  pipeline.Run(steady, 60);
  EXPECT_DOUBLE_EQ(pipeline[2].audio_stream_capacity(), 16);  // 8 on each of 2.
  EXPECT_FALSE(pipeline[1].audio_limited());
  EXPECT_EQ(pipeline[1].recommended_replicas(), 1);
  EXPECT_TRUE(pipeline[2].audio_limited());
  EXPECT_NEAR(pipeline[2].audio_demand_replicas(), 30 / (8 * 0.8), 1e-9);
  EXPECT_EQ(pipeline[2].recommended_replicas(), 5);
}

TEST(StageDemandTest, NoAudioMeasuredLeavesTheSignalAsItWas) {
  Steady steady = AudioPipeline();
  for (StageAudioLoad& audio : steady.audio) audio.per_replica.reset();
  Pipeline pipeline(3);
  pipeline.Run(steady, 60);
  for (int s = 0; s < 3; ++s) {
    EXPECT_FALSE(pipeline[s].audio_capacity_known());
    EXPECT_FALSE(pipeline[s].audio_limited());
    EXPECT_EQ(pipeline[s].recommended_replicas(), 1);
  }
  EXPECT_EQ(pipeline[2].audio_requests(), 25);
}

}  // namespace
}  // namespace omnistage
