#include "common/playback_model.h"

#include "gtest/gtest.h"

namespace omnistage {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST(PlaybackModelTest, NothingHeardBeforeAudio) {
  PlaybackModel player;
  player.Arrived(0, kT0);  // An empty chunk is no audio.
  EXPECT_FALSE(player.heard());
  EXPECT_EQ(player.first_audio(), absl::InfiniteFuture());
  EXPECT_EQ(player.runs_out(), absl::InfiniteFuture());
  EXPECT_EQ(player.buffered_seconds(kT0), 0);
  EXPECT_EQ(player.stalls(), 0);
  const PlaybackFigures figures = player.Figures(kT0);
  EXPECT_EQ(figures.first_audio_seconds, -1);
  EXPECT_EQ(figures.real_time_factor, 0);
}

TEST(PlaybackModelTest, AudioAheadOfThePlayerNeverStalls) {
  PlaybackModel player;
  // Each half second arrives while the previous one still plays.
  for (int i = 0; i < 10; ++i) player.Arrived(0.5, At(0.4 * i));
  EXPECT_EQ(player.stalls(), 0);
  EXPECT_EQ(player.stalled(), absl::ZeroDuration());
  EXPECT_EQ(player.first_audio(), At(0));
  EXPECT_EQ(player.last_audio(), At(3.6));
  EXPECT_DOUBLE_EQ(player.audio_seconds(), 5.0);
  EXPECT_EQ(player.runs_out(), At(5.0));
  EXPECT_DOUBLE_EQ(player.buffered_seconds(At(3.6)), 1.4);
  // Running out after the last audio is the end, not a stall.
  EXPECT_EQ(player.buffered_seconds(At(9)), 0);
  EXPECT_EQ(player.stalls(), 0);
}

TEST(PlaybackModelTest, AudioLaterThanThePlayerIsAStallOfTheWait) {
  PlaybackModel player;
  player.Arrived(0.5, At(0));    // plays 0 .. 0.5
  player.Arrived(0.5, At(0.8));  // waited 0.3, plays 0.8 .. 1.3
  player.Arrived(0.2, At(1.0));  // in time: plays 1.3 .. 1.5
  player.Arrived(0.1, At(2.0));  // waited 0.5
  EXPECT_EQ(player.stalls(), 2);
  EXPECT_EQ(player.stalled(), absl::Milliseconds(800));
  EXPECT_EQ(player.runs_out(), At(2.1));

  // Started 0.25 s before the first audio: the last came 2.25 s in, for
  // 1.3 s of audio.
  const PlaybackFigures figures = player.Figures(At(-0.25));
  EXPECT_DOUBLE_EQ(figures.first_audio_seconds, 0.25);
  EXPECT_DOUBLE_EQ(figures.real_time_factor, 2.25 / 1.3);
  EXPECT_EQ(figures.stalls, 2);
  EXPECT_DOUBLE_EQ(figures.stalled_seconds, 0.8);
  EXPECT_DOUBLE_EQ(figures.audio_seconds, 1.3);
}

TEST(PlaybackModelTest, TheJitterBufferDelaysPlayingAndAbsorbsLateAudio) {
  // Without the buffer the second chunk is 100 ms late; 200 ms of buffer
  // starts playing at 0.2 and it arrives with 100 ms to spare.
  PlaybackModel bare;
  PlaybackModel buffered(absl::Milliseconds(200));
  for (PlaybackModel* player : {&bare, &buffered}) {
    player->Arrived(0.4, At(0));
    player->Arrived(0.4, At(0.5));
  }
  EXPECT_EQ(bare.stalls(), 1);
  EXPECT_EQ(bare.stalled(), absl::Milliseconds(100));
  EXPECT_EQ(buffered.stalls(), 0);
  EXPECT_EQ(buffered.runs_out(), At(1.0));
  // Before playing starts it holds all it got.
  EXPECT_DOUBLE_EQ(buffered.buffered_seconds(At(0.1)), 0.8);
  EXPECT_DOUBLE_EQ(buffered.buffered_seconds(At(0.5)), 0.5);
}

}  // namespace
}  // namespace omnistage
