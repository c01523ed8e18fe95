// RealtimeTurnDetector: a Realtime session's server VAD (turn_detection
// "server_vad") over its input audio buffer — which of the appended audio is a
// turn, and where each turn starts and stops. Appended PCM (24 kHz 16-bit mono,
// pieces of any size) goes in; what it means comes out, in order:
//
//   kSpeechStarted  audio_ms = audio_start_ms: where the speech began, less
//                   prefix_padding_ms (voice_activity.h)
//   kAudio          the turn's audio: from audio_start_ms on (the padding
//                   included), as it comes
//   kSpeechStopped  audio_ms = audio_end_ms: where the speech ended; the
//                   turn's audio ran to where its silence_duration_ms passed
//
// Audio outside a turn is held (the last prefix_padding_ms and a second more:
// the next turn's beginning) and otherwise dropped. Times count from the
// session's first appended sample, across changes of the settings and
// detection switched off and on. Settings change at once when no speech is
// going on, else once it stopped (or Reset()). Without settings (turn_detection
// null) nothing is detected: Push() counts the audio and returns nothing.
// Pure: no I/O; one session's loop.
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_TURN_DETECTOR_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_TURN_DETECTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gateway/audio/voice_activity.h"

namespace omnistage {

struct TurnPiece {
  enum Kind { kSpeechStarted, kAudio, kSpeechStopped };
  Kind kind;
  int64_t audio_ms = 0;  // kSpeechStarted, kSpeechStopped: see above
  std::string pcm;       // kAudio
};

class RealtimeTurnDetector {
 public:
  RealtimeTurnDetector();
  ~RealtimeTurnDetector();

  // The detector's settings (nullopt: none, manual turns). INVALID_ARGUMENT
  // for an option out of its range, INTERNAL when the detector cannot be made:
  // the settings stay as they were.
  absl::Status Configure(const std::optional<VoiceActivityOptions>& options);
  // Detection is on now (settings that wait for the speech to stop do not
  // count yet).
  bool detecting() const { return vad_ != nullptr; }

  // The next appended PCM (whole 16-bit samples); what it completes.
  std::vector<TurnPiece> Push(const std::string& pcm);
  // Between kSpeechStarted and kSpeechStopped.
  bool in_speech() const { return vad_ != nullptr && vad_->in_speech(); }
  // The audio held outside a turn, taken (a commit of audio in which no speech
  // was detected).
  std::string TakeHeld();
  // The client committed or cleared the buffer: held audio is dropped, a turn
  // in progress ends without kSpeechStopped (speech still going on starts a
  // new one).
  void Reset();

 private:
  static constexpr int kBytesPerMs = VoiceActivity::kSampleRateHz / 1000 * 2;
  // The byte of the session's audio at `ms` of the current detector's clock.
  int64_t ByteAt(int64_t ms) const;
  void Install(std::unique_ptr<VoiceActivity> vad,
               const std::optional<VoiceActivityOptions>& options);
  void ApplyPending();

  std::unique_ptr<VoiceActivity> vad_;
  std::optional<VoiceActivityOptions> options_;
  // Settings waiting for the speech going on to stop.
  bool pending_ = false;
  std::unique_ptr<VoiceActivity> pending_vad_;
  std::optional<VoiceActivityOptions> pending_options_;
  // Bytes pushed in all; where the current detector's clock began.
  int64_t pushed_bytes_ = 0;
  int64_t vad_start_byte_ = 0;
  // Audio not yet handed out, and the session byte its first is.
  std::string held_;
  int64_t held_start_byte_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_TURN_DETECTOR_H_
