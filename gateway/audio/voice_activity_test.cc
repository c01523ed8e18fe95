// Sentences spoken by espeak-ng (speak_pcm: en-us, Klatt variant, 24 kHz)
// between silences, and noise: where turns start and stop against where the
// speech truly is (its first and last sample above |500|), when the stop comes,
// pauses inside and between turns, noise and silence that start nothing, the
// same events however the stream is cut, the options' ranges and Reset().
#include "gateway/audio/voice_activity.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gateway/audio/testing/spoken_clip.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr int kRate = VoiceActivity::kSampleRateHz;
constexpr int64_t kStartToleranceMs = 120;
constexpr int64_t kEndToleranceMs = 150;
constexpr char kFox[] = "The quick brown fox jumps over the lazy dog.";
constexpr char kTable[] = "Please book a table for two at seven tonight.";

using Clip = SpokenClip;

int64_t Ms(size_t samples) { return SpokenClip::Ms(samples); }

// An event and how much audio had been pushed when it came.
struct Heard {
  VoiceEvent event;
  int64_t pushed_ms;
};

// `samples` pushed in pieces of `piece` samples (0: all at once).
std::vector<Heard> Hear(VoiceActivity* vad, const std::vector<int16_t>& samples,
                        size_t piece = kRate / 50) {
  std::vector<Heard> heard;
  const absl::Span<const int16_t> all(samples);
  if (piece == 0) piece = samples.size();
  for (size_t at = 0; at < samples.size(); at += piece) {
    for (const VoiceEvent& event : vad->Push(all.subspan(at, piece))) {
      heard.push_back({event, vad->pushed_ms()});
    }
  }
  return heard;
}

std::unique_ptr<VoiceActivity> Make(VoiceActivityOptions options = {}) {
  absl::StatusOr<std::unique_ptr<VoiceActivity>> vad = VoiceActivity::Create(options);
  EXPECT_TRUE(vad.ok()) << vad.status();
  return vad.ok() ? *std::move(vad) : nullptr;
}

TEST(VoiceActivityTest, ASentenceIsOneTurn) {
  Clip clip;
  clip.Silence(1000).Say(kFox).Silence(1500);
  std::unique_ptr<VoiceActivity> vad = Make();
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].event.kind, VoiceEvent::kSpeechStarted);
  EXPECT_NEAR(heard[0].event.audio_ms, clip.onsets_ms[0] - 300, kStartToleranceMs);
  // Said soon after the speech began (the start needs 100 ms of it).
  EXPECT_LE(heard[0].pushed_ms, clip.onsets_ms[0] + 250);
  EXPECT_EQ(heard[1].event.kind, VoiceEvent::kSpeechStopped);
  EXPECT_NEAR(heard[1].event.audio_ms, clip.ends_ms[0], kEndToleranceMs);
  // Only once 500 ms have passed since the end, and at once then (one 20 ms
  // piece and one 10 ms frame later at most).
  EXPECT_GE(heard[1].pushed_ms, heard[1].event.audio_ms + 500);
  EXPECT_LE(heard[1].pushed_ms, heard[1].event.audio_ms + 500 + 30);
  EXPECT_GE(heard[1].pushed_ms, clip.ends_ms[0] + 500 - kEndToleranceMs);
  EXPECT_FALSE(vad->in_speech());
  EXPECT_EQ(vad->pushed_ms(), Ms(clip.samples.size()));
}

TEST(VoiceActivityTest, InSpeechBetweenTheEvents) {
  Clip clip;
  clip.Silence(800).Say(kTable);
  std::unique_ptr<VoiceActivity> vad = Make();
  EXPECT_FALSE(vad->in_speech());
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].event.kind, VoiceEvent::kSpeechStarted);
  EXPECT_TRUE(vad->in_speech());
}

TEST(VoiceActivityTest, PaddingStopsAtTheStreamsStart) {
  Clip clip;
  clip.Silence(100).Say(kFox).Silence(1000);
  std::unique_ptr<VoiceActivity> vad = Make();
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].event.audio_ms, 0);
}

TEST(VoiceActivityTest, ASentenceInModerateNoiseIsOneTurn) {
  Clip clip;
  clip.Silence(1000).Say(kTable).Silence(1500).Noise(300, 7);
  std::unique_ptr<VoiceActivity> vad = Make();
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_NEAR(heard[0].event.audio_ms, clip.onsets_ms[0] - 300, kStartToleranceMs);
  EXPECT_NEAR(heard[1].event.audio_ms, clip.ends_ms[0], kEndToleranceMs);
}

TEST(VoiceActivityTest, AShortPauseStaysInTheTurn) {
  Clip clip;
  clip.Silence(1000).Say(kFox).Silence(300).Say(kTable).Silence(1500);
  std::unique_ptr<VoiceActivity> vad = Make();
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_NEAR(heard[0].event.audio_ms, clip.onsets_ms[0] - 300, kStartToleranceMs);
  EXPECT_NEAR(heard[1].event.audio_ms, clip.ends_ms[1], kEndToleranceMs);
}

TEST(VoiceActivityTest, ALongPauseEndsTheTurn) {
  Clip clip;
  clip.Silence(1000).Say(kFox).Silence(1000).Say(kTable).Silence(1500);
  std::unique_ptr<VoiceActivity> vad = Make();
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 4u);
  for (int turn = 0; turn < 2; ++turn) {
    EXPECT_EQ(heard[2 * turn].event.kind, VoiceEvent::kSpeechStarted);
    EXPECT_NEAR(heard[2 * turn].event.audio_ms, clip.onsets_ms[turn] - 300, kStartToleranceMs);
    EXPECT_EQ(heard[2 * turn + 1].event.kind, VoiceEvent::kSpeechStopped);
    EXPECT_NEAR(heard[2 * turn + 1].event.audio_ms, clip.ends_ms[turn], kEndToleranceMs);
  }
}

TEST(VoiceActivityTest, SilenceDurationIsAnOption) {
  // A 1000 ms pause is inside a turn that needs 1200 ms of silence to end.
  Clip clip;
  clip.Silence(1000).Say(kFox).Silence(1000).Say(kTable).Silence(2000);
  VoiceActivityOptions options;
  options.silence_duration_ms = 1200;
  std::unique_ptr<VoiceActivity> vad = Make(options);
  const std::vector<Heard> heard = Hear(vad.get(), clip.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_GE(heard[1].pushed_ms, heard[1].event.audio_ms + 1200);
}

TEST(VoiceActivityTest, NoiseAloneStartsNothing) {
  Clip clip;
  clip.Silence(10000).Noise(300, 1);
  std::unique_ptr<VoiceActivity> vad = Make();
  EXPECT_TRUE(Hear(vad.get(), clip.samples).empty());
  EXPECT_FALSE(vad->in_speech());
}

TEST(VoiceActivityTest, SilenceStartsNothing) {
  Clip clip;
  clip.Silence(5000);
  std::unique_ptr<VoiceActivity> vad = Make();
  EXPECT_TRUE(Hear(vad.get(), clip.samples).empty());
  EXPECT_EQ(vad->pushed_ms(), 5000);
}

TEST(VoiceActivityTest, PiecesOfAnySizeHearTheSame) {
  Clip clip;
  clip.Silence(700).Say(kFox).Silence(900).Say(kTable).Silence(1200).Noise(100, 3);
  std::unique_ptr<VoiceActivity> whole = Make();
  const std::vector<Heard> at_once = Hear(whole.get(), clip.samples, 0);
  ASSERT_EQ(at_once.size(), 4u);
  std::unique_ptr<VoiceActivity> pieces = Make();
  std::vector<VoiceEvent> heard;
  const size_t sizes[] = {1, 7, 239, 241, 480, 1001, 3, 4799};
  const absl::Span<const int16_t> all(clip.samples);
  for (size_t at = 0, i = 0; at < all.size(); at += sizes[i++ % std::size(sizes)]) {
    for (const VoiceEvent& event : pieces->Push(all.subspan(at, sizes[i % std::size(sizes)]))) {
      heard.push_back(event);
    }
  }
  ASSERT_EQ(heard.size(), at_once.size());
  for (size_t i = 0; i < heard.size(); ++i) {
    EXPECT_EQ(heard[i].kind, at_once[i].event.kind) << i;
    EXPECT_EQ(heard[i].audio_ms, at_once[i].event.audio_ms) << i;
  }
  EXPECT_EQ(pieces->pushed_ms(), whole->pushed_ms());
}

TEST(VoiceActivityTest, OptionsOutOfRangeAreRefused) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<VoiceActivityOptions> refused = {
      {-0.01, 300, 500}, {1.01, 300, 500}, {nan, 300, 500},  {0.5, -1, 500},
      {0.5, 10001, 500}, {0.5, 300, -1},   {0.5, 300, 10001}};
  for (const VoiceActivityOptions& options : refused) {
    absl::StatusOr<std::unique_ptr<VoiceActivity>> vad = VoiceActivity::Create(options);
    EXPECT_EQ(vad.status().code(), absl::StatusCode::kInvalidArgument)
        << options.threshold << " " << options.prefix_padding_ms << " "
        << options.silence_duration_ms;
  }
  const std::vector<VoiceActivityOptions> accepted = {
      {0, 0, 0}, {1, 10000, 10000}, {0.5, 300, 500}};
  for (const VoiceActivityOptions& options : accepted) {
    EXPECT_TRUE(VoiceActivity::Create(options).ok()) << options.threshold;
  }
}

TEST(VoiceActivityTest, ResetEndsATurnWithoutAStop) {
  Clip clip;
  clip.Silence(1000).Say(kFox);
  std::unique_ptr<VoiceActivity> vad = Make();
  ASSERT_EQ(Hear(vad.get(), clip.samples).size(), 1u);
  ASSERT_TRUE(vad->in_speech());
  vad->Reset();
  EXPECT_FALSE(vad->in_speech());
  Clip silence;
  silence.Silence(2000);
  EXPECT_TRUE(Hear(vad.get(), silence.samples).empty());
  // The clock goes on.
  EXPECT_EQ(vad->pushed_ms(), Ms(clip.samples.size()) + 2000);
}

TEST(VoiceActivityTest, SpeechGoingOnAfterResetStartsAnotherTurn) {
  Clip first, rest;
  first.Silence(1000).Say(kFox);
  rest.Say(kTable).Silence(1500);
  std::unique_ptr<VoiceActivity> vad = Make();
  ASSERT_EQ(Hear(vad.get(), first.samples).size(), 1u);
  vad->Reset();
  const std::vector<Heard> heard = Hear(vad.get(), rest.samples);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].event.kind, VoiceEvent::kSpeechStarted);
  // At the new turn's own speech, padded back into the last.
  EXPECT_NEAR(heard[0].event.audio_ms, Ms(first.samples.size()) - 300, kStartToleranceMs);
  EXPECT_EQ(heard[1].event.kind, VoiceEvent::kSpeechStopped);
}

}  // namespace
}  // namespace omnistage

// Its own main rather than gtest_main's: libwebrtc_audio_processing.so
// exports a main of its own (bazel/BUILD), which would win over one taken from
// an archive, run instead of the tests and exit 0.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
