// The server VAD over appended audio (realtime_turn_detector.h), on sentences
// spoken by espeak-ng between silences: which bytes a turn gets (exactly the
// input's, from the padded start to where the silence passed), the times in the
// session's clock, audio held outside turns, settings changed between and
// during turns, detection off, and the same pieces however the input is cut.
#include "gateway/realtime/realtime_turn_detector.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gateway/audio/testing/spoken_clip.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr int64_t kBytesPerMs = 48;
constexpr int64_t kStartToleranceMs = 120;
constexpr int64_t kEndToleranceMs = 150;
constexpr char kFox[] = "The quick brown fox jumps over the lazy dog.";
constexpr char kTable[] = "Please book a table for two at seven tonight.";

// What pushes gave, the audio of each turn joined.
struct Turn {
  int64_t start_ms = -1, end_ms = -1;
  std::string audio;
  // Bytes pushed when the start and the stop came.
  int64_t started_at = -1, stopped_at = -1;
};

// `bytes` pushed in pieces of `piece` bytes; the turns they made. Audio
// outside a turn fails the test.
// `begun`: a turn begun in earlier pushes goes on (its start_ms -1).
std::vector<Turn> Push(RealtimeTurnDetector* detector, const std::string& bytes,
                       size_t piece = 4800, int64_t pushed_before = 0, bool begun = false) {
  std::vector<Turn> turns;
  bool open = begun;
  if (begun) turns.emplace_back();
  for (size_t at = 0; at < bytes.size(); at += piece) {
    const int64_t pushed = pushed_before + static_cast<int64_t>(std::min(bytes.size(), at + piece));
    for (TurnPiece& p : detector->Push(bytes.substr(at, piece))) {
      switch (p.kind) {
        case TurnPiece::kSpeechStarted:
          EXPECT_FALSE(open);
          open = true;
          turns.push_back({p.audio_ms, -1, "", pushed, -1});
          break;
        case TurnPiece::kAudio:
          EXPECT_TRUE(open) << "audio outside a turn";
          if (open) turns.back().audio += p.pcm;
          break;
        case TurnPiece::kSpeechStopped:
          EXPECT_TRUE(open);
          open = false;
          turns.back().end_ms = p.audio_ms;
          turns.back().stopped_at = pushed;
          break;
      }
    }
  }
  return turns;
}

std::unique_ptr<RealtimeTurnDetector> Detecting(VoiceActivityOptions options = {}) {
  auto detector = std::make_unique<RealtimeTurnDetector>();
  EXPECT_TRUE(detector->Configure(options).ok());
  return detector;
}

TEST(RealtimeTurnDetectorTest, ATurnIsTheInputFromItsPaddedStartToItsStop) {
  SpokenClip clip;
  clip.Silence(1000).Say(kFox).Silence(1500);
  const std::string bytes = clip.Bytes();
  auto detector = Detecting();
  EXPECT_TRUE(detector->detecting());
  const std::vector<Turn> turns = Push(detector.get(), bytes);
  ASSERT_EQ(turns.size(), 1u);
  const Turn& turn = turns[0];
  EXPECT_NEAR(turn.start_ms, clip.onsets_ms[0] - 300, kStartToleranceMs);
  EXPECT_NEAR(turn.end_ms, clip.ends_ms[0], kEndToleranceMs);
  // The stop came once 500 ms of silence had passed, within one 100 ms piece.
  EXPECT_GE(turn.stopped_at, (turn.end_ms + 500) * kBytesPerMs);
  EXPECT_LE(turn.stopped_at, (turn.end_ms + 500 + 110) * kBytesPerMs);
  // The turn's audio is the input's bytes from the padded start to where the
  // silence passed: nothing lost, nothing repeated.
  const int64_t from = turn.start_ms * kBytesPerMs;
  ASSERT_GT(turn.audio.size(), 0u);
  EXPECT_EQ(turn.audio, bytes.substr(from, turn.audio.size()));
  const int64_t to = from + static_cast<int64_t>(turn.audio.size());
  EXPECT_GE(to, (turn.end_ms + 500) * kBytesPerMs);
  EXPECT_LE(to, (turn.end_ms + 510) * kBytesPerMs);
  EXPECT_FALSE(detector->in_speech());
}

TEST(RealtimeTurnDetectorTest, TheSameTurnsHoweverTheInputIsCut) {
  SpokenClip clip;
  clip.Silence(700).Say(kFox).Silence(1000).Say(kTable).Silence(900);
  const std::string bytes = clip.Bytes();
  auto a = Detecting(), b = Detecting(), c = Detecting();
  const std::vector<Turn> by_100ms = Push(a.get(), bytes);
  const std::vector<Turn> by_odd = Push(b.get(), bytes, 2 * 331);
  const std::vector<Turn> whole = Push(c.get(), bytes, bytes.size());
  ASSERT_EQ(by_100ms.size(), 2u);
  for (const std::vector<Turn>* other : {&by_odd, &whole}) {
    ASSERT_EQ(other->size(), by_100ms.size());
    for (size_t i = 0; i < by_100ms.size(); ++i) {
      EXPECT_EQ((*other)[i].start_ms, by_100ms[i].start_ms);
      EXPECT_EQ((*other)[i].end_ms, by_100ms[i].end_ms);
      // A stop is handed out where it was decided, whatever the piece.
      EXPECT_EQ((*other)[i].audio, by_100ms[i].audio) << "turn " << i;
    }
  }
  for (size_t i = 0; i < by_100ms.size(); ++i) {
    EXPECT_NEAR(by_100ms[i].start_ms, clip.onsets_ms[i] - 300, kStartToleranceMs);
    EXPECT_NEAR(by_100ms[i].end_ms, clip.ends_ms[i], kEndToleranceMs);
  }
}

TEST(RealtimeTurnDetectorTest, WithoutSettingsNothingIsDetectedButTheClockRuns) {
  SpokenClip before;
  before.Silence(500).Say(kTable).Silence(500);
  RealtimeTurnDetector detector;
  EXPECT_FALSE(detector.detecting());
  EXPECT_TRUE(Push(&detector, before.Bytes()).empty());
  EXPECT_EQ(detector.TakeHeld(), "");
  // Switched on later: its times count from the session's first sample.
  ASSERT_TRUE(detector.Configure(VoiceActivityOptions{}).ok());
  SpokenClip clip;
  clip.Silence(800).Say(kFox).Silence(800);
  const int64_t offset = static_cast<int64_t>(before.Bytes().size());
  const std::vector<Turn> turns = Push(&detector, clip.Bytes(), 4800, offset);
  ASSERT_EQ(turns.size(), 1u);
  const int64_t offset_ms = offset / kBytesPerMs;
  EXPECT_NEAR(turns[0].start_ms, offset_ms + clip.onsets_ms[0] - 300, kStartToleranceMs);
  EXPECT_NEAR(turns[0].end_ms, offset_ms + clip.ends_ms[0], kEndToleranceMs);
  // And off again: nothing more.
  ASSERT_TRUE(detector.Configure(std::nullopt).ok());
  EXPECT_FALSE(detector.detecting());
  EXPECT_TRUE(Push(&detector, clip.Bytes()).empty());
}

TEST(RealtimeTurnDetectorTest, SettingsChangedDuringSpeechWaitForItsStop) {
  SpokenClip clip;
  clip.Silence(800).Say(kFox);
  SpokenClip rest;
  rest.Silence(1200).Say(kTable).Silence(400);
  auto detector = Detecting();
  std::vector<Turn> turns = Push(detector.get(), clip.Bytes());
  ASSERT_EQ(turns.size(), 1u);
  ASSERT_TRUE(detector->in_speech());
  // 300 ms of silence ends the next turn: not this one, which stops after its
  // 500 ms; the next one stops on the new setting.
  ASSERT_TRUE(detector->Configure(VoiceActivityOptions{0.5, 300, 300}).ok());
  const int64_t offset = static_cast<int64_t>(clip.Bytes().size());
  turns = Push(detector.get(), rest.Bytes(), 4800, offset, /*begun=*/true);
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[0].start_ms, -1);  // begun in the earlier pushes
  EXPECT_GE(turns[0].stopped_at - offset, 500 * kBytesPerMs);
  // The second stopped 300 ms after its speech, before the input's end (400 ms on).
  EXPECT_NE(turns[1].end_ms, -1);
  EXPECT_LE(turns[1].stopped_at, (turns[1].end_ms + 300 + 110) * kBytesPerMs);
}

TEST(RealtimeTurnDetectorTest, AudioOutsideATurnIsHeldUpToItsPrefixAndASecond) {
  SpokenClip silence;
  silence.Silence(3000);
  auto detector = Detecting();
  EXPECT_TRUE(Push(detector.get(), silence.Bytes()).empty());
  const std::string held = detector->TakeHeld();
  EXPECT_EQ(held.size(), static_cast<size_t>((300 + 1000) * kBytesPerMs));
  EXPECT_EQ(detector->TakeHeld(), "");
  // Reset drops what is held, and ends a turn without a stop; speech still
  // going on starts another.
  SpokenClip clip;
  clip.Silence(600).Say(kFox);
  const std::vector<Turn> turns = Push(detector.get(), clip.Bytes());
  ASSERT_EQ(turns.size(), 1u);
  ASSERT_TRUE(detector->in_speech());
  detector->Reset();
  EXPECT_FALSE(detector->in_speech());
  EXPECT_EQ(detector->TakeHeld(), "");
}

TEST(RealtimeTurnDetectorTest, SettingsOutOfRangeAreRefusedAndKept) {
  auto detector = Detecting();
  const absl::Status status = detector->Configure(VoiceActivityOptions{1.5, 300, 500});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(detector->detecting());
  SpokenClip clip;
  clip.Silence(800).Say(kTable).Silence(800);
  EXPECT_EQ(Push(detector.get(), clip.Bytes()).size(), 1u);
}

}  // namespace
}  // namespace omnistage

// Its own main rather than gtest_main's: libwebrtc_audio_processing.so exports
// a main of its own (bazel/BUILD).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
