#include "common/playback_model.h"

#include <algorithm>

namespace omnistage {

void PlaybackModel::Arrived(double seconds, absl::Time now) {
  if (!(seconds > 0)) return;
  if (audio_seconds_ == 0) {
    first_audio_ = now;
    runs_out_ = now + jitter_buffer_;  // Playing starts here.
  } else if (now > runs_out_) {
    // It played all it had, and the listener waited for this.
    ++stalls_;
    stalled_ += now - runs_out_;
    runs_out_ = now;
  }
  last_audio_ = now;
  audio_seconds_ += seconds;
  runs_out_ += absl::Seconds(seconds);
}

double PlaybackModel::buffered_seconds(absl::Time now) const {
  if (audio_seconds_ == 0) return 0;
  // Before playing starts it holds everything it got.
  const absl::Time playing_from = std::max(now, first_audio_ + jitter_buffer_);
  return std::max(0.0, absl::ToDoubleSeconds(runs_out_ - playing_from));
}

PlaybackFigures PlaybackModel::Figures(absl::Time started) const {
  PlaybackFigures figures;
  if (!heard()) return figures;
  figures.first_audio_seconds = absl::ToDoubleSeconds(first_audio_ - started);
  figures.real_time_factor = absl::ToDoubleSeconds(last_audio_ - started) / audio_seconds_;
  figures.stalls = stalls_;
  figures.stalled_seconds = absl::ToDoubleSeconds(stalled_);
  figures.audio_seconds = audio_seconds_;
  return figures;
}

}  // namespace omnistage
