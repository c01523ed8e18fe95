#include "orchestrator/core/audio_capacity.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

// A pipeline whose step makes 40 ms of audio per stream in 12 ms + 0.45 ms per
// stream: y = 0.3 + 0.01125 N, real time up to N = 62.2.
double AudioOf(int streams, double seconds) {
  return streams * seconds / (0.3 + 0.01125 * streams);
}

TEST(AudioCapacityTest, UnknownUntilTheStreamsSpreadAndShowASlope) {
  AudioCapacity capacity(absl::Seconds(60));
  EXPECT_FALSE(capacity.Streams().has_value());
  // Always 8 streams: no slope to see.
  for (int i = 0; i < 10; ++i) capacity.Sample(8, 8, AudioOf(8, 1), absl::Seconds(1));
  EXPECT_FALSE(capacity.Streams().has_value());
  EXPECT_NEAR(capacity.last_seconds_per_audio_second(), 0.39, 1e-9);
  // Nothing playing says nothing.
  capacity.Sample(0, 0, 0, absl::Seconds(1));
  EXPECT_FALSE(capacity.Streams().has_value());
}

TEST(AudioCapacityTest, FindsWhereStreamsStopBeingRealTime) {
  AudioCapacity capacity(absl::Seconds(60));
  for (int streams : {1, 4, 8, 16, 24, 32}) {
    capacity.Sample(streams, streams, AudioOf(streams, 1), absl::Seconds(1));
  }
  ASSERT_TRUE(capacity.Streams().has_value());
  EXPECT_NEAR(*capacity.Streams(), 0.7 / 0.01125, 1e-6);
}

TEST(AudioCapacityTest, OldSamplesFadeWhenThePipelineChanges) {
  AudioCapacity capacity(absl::Seconds(10));
  for (int i = 0; i < 20; ++i) {
    const int streams = 4 + (i % 5) * 6;
    capacity.Sample(streams, streams, AudioOf(streams, 1), absl::Seconds(1));
  }
  ASSERT_TRUE(capacity.Streams().has_value());
  EXPECT_NEAR(*capacity.Streams(), 62.2, 0.1);
  // A second replica of the slow stage: each stream costs half as much.
  for (int i = 0; i < 120; ++i) {
    const int streams = 4 + (i % 5) * 6;
    capacity.Sample(streams, streams, streams / (0.3 + 0.005625 * streams), absl::Seconds(1));
  }
  EXPECT_NEAR(*capacity.Streams(), 0.7 / 0.005625, 1.0);
  // Held at its capacity for long: no spread left, the capacity stays.
  for (int i = 0; i < 600; ++i)
    capacity.Sample(120, 120, 120 / (0.3 + 0.005625 * 120), absl::Seconds(1));
  EXPECT_NEAR(*capacity.Streams(), 0.7 / 0.005625, 1.0);
}

TEST(AudioCapacityTest, AStageAlreadyTooSlowAtOneStreamHoldsNone) {
  AudioCapacity capacity(absl::Seconds(60));
  for (int streams : {1, 2, 3, 4, 5}) {
    capacity.Sample(streams, streams, streams / (1.2 + 0.1 * streams), absl::Seconds(1));
  }
  ASSERT_TRUE(capacity.Streams().has_value());
  EXPECT_EQ(*capacity.Streams(), 0);
}

}  // namespace
}  // namespace omnistage
