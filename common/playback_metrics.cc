#include "common/playback_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// Real-time factors: well under 1 (audio made far faster than it plays) to
// 10 (a second of audio every ten).
const std::vector<double>& RealTimeFactorBuckets() {
  static const std::vector<double> bounds = {0.05, 0.1,  0.2, 0.3, 0.5, 0.7, 0.85,
                                             1,    1.25, 1.5, 2,   3,   5,   10};
  return bounds;
}

std::vector<std::string> With(std::vector<std::string> labels, const char* more) {
  labels.push_back(more);
  return labels;
}

}  // namespace

PlaybackMetrics::PlaybackMetrics(MetricsRegistry* registry, absl::string_view prefix,
                                 std::vector<std::string> labels)
    : first_audio_(
          registry->AddHistogram(absl::StrCat(prefix, "_time_to_first_audio_seconds"),
                                 "From a request's start to the first audio sent to its client.",
                                 labels, LatencyBuckets())),
      real_time_factor_(registry->AddHistogram(
          absl::StrCat(prefix, "_audio_real_time_factor"),
          "Per request with audio: from its start to its last audio, over the seconds of "
          "audio (below 1: made faster than it plays).",
          labels, RealTimeFactorBuckets())),
      responses_(registry->AddCounter(
          absl::StrCat(prefix, "_audio_responses_total"),
          "Requests that sent audio, by whether a listener playing it as it came stalled "
          "(ran out of audio before more came).",
          With(labels, "stalled"))),
      stalls_(registry->AddCounter(absl::StrCat(prefix, "_playback_stalls_total"),
                                   "Times a listener playing a request's audio as it came ran "
                                   "out of audio before more came.",
                                   labels)),
      stalled_seconds_(registry->AddCounter(
          absl::StrCat(prefix, "_playback_stalled_seconds_total"),
          "Seconds listeners waited, mid-answer, for audio that came late.", labels)),
      audio_seconds_(registry->AddCounter(absl::StrCat(prefix, "_audio_seconds_total"),
                                          "Seconds of audio sent to clients.", labels)) {
  if (labels.empty()) {
    // Known at start: every series exists from the first scrape.
    first_audio_.With({});
    real_time_factor_.With({});
    for (const char* stalled : {"false", "true"}) responses_.With({stalled});
    stalls_.With({});
    stalled_seconds_.With({});
    audio_seconds_.With({});
  }
}

void PlaybackMetrics::Heard(const std::vector<std::string>& values,
                            const PlaybackFigures& figures) {
  if (!(figures.audio_seconds > 0)) return;
  first_audio_.With(values).Observe(figures.first_audio_seconds);
  real_time_factor_.With(values).Observe(figures.real_time_factor);
  std::vector<std::string> by_stalled = values;
  by_stalled.push_back(figures.stalls > 0 ? "true" : "false");
  responses_.With(by_stalled).Increment();
  stalls_.With(values).Increment(static_cast<double>(figures.stalls));
  stalled_seconds_.With(values).Increment(figures.stalled_seconds);
  audio_seconds_.With(values).Increment(figures.audio_seconds);
}

}  // namespace omnistage
