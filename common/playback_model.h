// PlaybackModel: a listener who plays a request's audio as it arrives, at
// real time — what time to first audio, the real-time factor and playback
// stalls are measured against (docs/observability.md, "How a listener hears
// it").
//
// The player starts `jitter_buffer` after the first audio arrives and plays
// without pause while it has audio. When it has played everything it got and
// more audio arrives later, that wait is a stall: the listener heard silence
// mid-answer. Running out after the last audio is the end of the answer, not
// a stall. While audio is playing, `runs_out()` is the stream's playback
// deadline: the moment the listener would hear nothing more.
//
//   PlaybackModel player(absl::Milliseconds(100));
//   player.Arrived(0.5, t0);            // plays t0+100ms .. t0+600ms
//   player.Arrived(0.5, t0 + 0.8s);     // a stall of 200 ms, then plays to t0+1.3s
//   player.stalls() == 1; player.stalled() == 200ms;
//
// Not thread-safe: one per request, on its owner's thread.
#ifndef OMNISTAGE_COMMON_PLAYBACK_MODEL_H_
#define OMNISTAGE_COMMON_PLAYBACK_MODEL_H_

#include <cstdint>

#include "absl/time/time.h"

namespace omnistage {

// What a listener heard of one request, for its record, its access line and
// the metrics.
struct PlaybackFigures {
  // From the request's start to the first audio; -1 without audio.
  double first_audio_seconds = -1;
  // From the request's start to the last audio, over the seconds of audio
  // (below 1: faster than it plays); 0 without audio.
  double real_time_factor = 0;
  int64_t stalls = 0;
  double stalled_seconds = 0;
  double audio_seconds = 0;
};

class PlaybackModel {
 public:
  explicit PlaybackModel(absl::Duration jitter_buffer = absl::ZeroDuration())
      : jitter_buffer_(jitter_buffer) {}

  // `seconds` of audio reached the listener at `now` (calls in time order;
  // 0 seconds counts as no audio).
  void Arrived(double seconds, absl::Time now);

  bool heard() const { return audio_seconds_ > 0; }
  // When the first and the last audio arrived (InfiniteFuture before any).
  absl::Time first_audio() const { return first_audio_; }
  absl::Time last_audio() const { return last_audio_; }
  double audio_seconds() const { return audio_seconds_; }
  // When the player runs out of the audio it has (InfiniteFuture before any):
  // the stream's playback deadline.
  absl::Time runs_out() const { return runs_out_; }
  // The audio the player holds at `now` and has yet to play, in seconds.
  double buffered_seconds(absl::Time now) const;
  int64_t stalls() const { return stalls_; }
  absl::Duration stalled() const { return stalled_; }

  // The figures of a request that started at `started`.
  PlaybackFigures Figures(absl::Time started) const;

 private:
  absl::Duration jitter_buffer_;
  absl::Time first_audio_ = absl::InfiniteFuture();
  absl::Time last_audio_ = absl::InfiniteFuture();
  absl::Time runs_out_ = absl::InfiniteFuture();
  double audio_seconds_ = 0;
  int64_t stalls_ = 0;
  absl::Duration stalled_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PLAYBACK_MODEL_H_
