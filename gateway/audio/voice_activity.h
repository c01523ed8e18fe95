// VoiceActivity: where speech starts and stops in a stream of audio, for the
// Realtime API's server VAD (turn_detection "server_vad"). 16-bit mono PCM at
// 24 kHz (the API's input rate) goes in, in pieces of any size; events come out
// with OpenAI's meaning:
//
//   speech started: audio_ms = where the speech began, less prefix_padding_ms
//     (not below 0);
//   speech stopped: once silence_duration_ms have passed since the speech
//     ended; audio_ms = where it ended.
//
//   absl::StatusOr<std::unique_ptr<VoiceActivity>> vad = VoiceActivity::Create({});
//   for (const VoiceEvent& event : (*vad)->Push(samples)) ...
//
// A 10 ms frame is voiced when both of these say so:
// - WebRTC's voice activity detector (Debian's libwebrtc-audio-processing,
//   through its AudioProcessing module's VoiceDetection): a Gaussian mixture
//   model of speech and of noise over six frequency bands, the noise model
//   adapting to the input. The module takes the 24 kHz stream as it is (it
//   resamples to 32 kHz and runs the detector on the 0-8 kHz band at 16 kHz),
//   so nothing is resampled here.
// - An energy gate: the frame's RMS is 20 x threshold^2 dB above the noise
//   floor (the quietest frames' RMS, followed down at once and up by 3 dB a
//   second, never taken below 10). On its own the detector starts turns on
//   steady noise and splits them, and ends them 80-150 ms late (its
//   hangover); the gate keeps both out.
//
// Turns over those decisions:
// - Speech starts once 6 + 8 x threshold (rounded) frames are voiced, with no
//   more than 50 ms between one and the next; the speech began at the first.
// - It stops once silence_duration_ms have passed since the last voiced frame
//   ended (where the speech ended): a shorter pause stays inside the turn.
//
// threshold (OpenAI's "how sure", default 0.5) sets all three: the gate (0 dB
// at 0, 1.8 at 0.3, 5 at 0.5, 12.8 at 0.8, 20 at 1), the start (60 to 140 ms
// of voiced frames) and the detector's aggressiveness: its mode 0 (the most
// ready to call audio voiced) below 0.25, mode 1 below 0.5, mode 2 below
// 0.75, else mode 3. A low threshold finds speech in louder noise; a high one
// lets fewer other sounds start a turn. Background talk is speech to both
// tests: at 0.5 it holds a turn open even 20 dB below the speaker; at 0.8 it
// mostly does not, but white noise 10 dB below the speaker hides most speech.
// Figures per threshold and noise: docs/benchmarks.md, "Voice activity".
//
// Times are milliseconds from the first sample pushed; Reset() ends a turn but
// not the clock (OpenAI counts from the session's start). Not thread-safe (one
// session's loop).
#ifndef OMNISTAGE_GATEWAY_AUDIO_VOICE_ACTIVITY_H_
#define OMNISTAGE_GATEWAY_AUDIO_VOICE_ACTIVITY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace webrtc {
class AudioProcessing;
}  // namespace webrtc

namespace omnistage {

struct VoiceActivityOptions {
  double threshold = 0.5;         // 0..1: higher needs more certain speech
  int prefix_padding_ms = 300;    // 0..10000
  int silence_duration_ms = 500;  // 0..10000
};

struct VoiceEvent {
  enum Kind { kSpeechStarted, kSpeechStopped };
  Kind kind;
  int64_t audio_ms;    // see VoiceActivity
  int64_t decided_ms;  // the end of the frame that decided it
};

class VoiceActivity {
 public:
  // The input's rate.
  static constexpr int kSampleRateHz = 24000;

  // INVALID_ARGUMENT for an option out of its range (above); INTERNAL when
  // WebRTC's module refuses its settings.
  static absl::StatusOr<std::unique_ptr<VoiceActivity>> Create(const VoiceActivityOptions& options);
  ~VoiceActivity();
  VoiceActivity(const VoiceActivity&) = delete;
  VoiceActivity& operator=(const VoiceActivity&) = delete;

  // The next samples; the events they complete, in order. A piece's last
  // partial 10 ms waits for the next piece, so the events do not depend on how
  // the stream is cut.
  std::vector<VoiceEvent> Push(absl::Span<const int16_t> samples);

  // A new input buffer (the client cleared or committed it): a turn in
  // progress ends without an event; speech still going on starts a new one.
  void Reset();

  // Between a speech-started event and its speech-stopped.
  bool in_speech() const { return in_speech_; }
  // The audio pushed so far, in ms.
  int64_t pushed_ms() const { return samples_pushed_ * 1000 / kSampleRateHz; }

 private:
  static constexpr int kFrameMs = 10;
  static constexpr int kFrameSamples = kSampleRateHz / 1000 * kFrameMs;

  VoiceActivity(const VoiceActivityOptions& options, std::unique_ptr<webrtc::AudioProcessing> apm);
  // Whether the frame in frame_, of RMS `rms`, is voiced.
  bool Voiced(double rms);
  // Moves the turn on by one frame; appends its event, if any.
  void Step(bool voiced, std::vector<VoiceEvent>* events);

  // Constant after construction.
  const VoiceActivityOptions options_;
  const double gate_ratio_;  // over the noise floor, in RMS
  const int start_frames_;   // voiced frames that start speech
  const std::unique_ptr<webrtc::AudioProcessing> apm_;

  std::array<float, kFrameSamples> frame_{};  // the frame being filled
  int frame_filled_ = 0;
  double frame_energy_ = 0;  // its sum of squares, in 16-bit units
  int64_t samples_pushed_ = 0;
  int64_t frames_done_ = 0;
  double floor_rms_ = 0;

  bool in_speech_ = false;
  int run_frames_ = 0;        // voiced frames since the run began, outside speech
  int64_t run_start_ms_ = 0;  // where that run (and so the speech) began
  int64_t last_voiced_end_ms_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_VOICE_ACTIVITY_H_
