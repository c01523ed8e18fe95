// PlaybackMetrics: how listeners heard the audio of the requests that ended,
// as Prometheus metrics (docs/observability.md, "How a listener hears it"):
// time to first audio, the real-time factor, and playback stalls. The
// orchestrator and the gateway each keep one, under their own prefix.
//
//   PlaybackMetrics heard(&registry, "omnistage_gateway", {"route"});
//   heard.Heard({"/v1/audio/speech"}, player.Figures(started));
//
// Thread-safe, as the registry's children are.
#ifndef OMNISTAGE_COMMON_PLAYBACK_METRICS_H_
#define OMNISTAGE_COMMON_PLAYBACK_METRICS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/metrics.h"
#include "common/playback_model.h"

namespace omnistage {

class PlaybackMetrics {
 public:
  // Adds the families `<prefix>_time_to_first_audio_seconds`,
  // `<prefix>_audio_real_time_factor`, `<prefix>_audio_responses_total`
  // (by `stalled`), `<prefix>_playback_stalls_total`,
  // `<prefix>_playback_stalled_seconds_total` and `<prefix>_audio_seconds_total`
  // to `registry` (which must outlive this), each with the labels `labels`.
  PlaybackMetrics(MetricsRegistry* registry, absl::string_view prefix,
                  std::vector<std::string> labels = {});

  // A request that ended, labelled `values` (one per label); one without
  // audio counts nowhere.
  void Heard(const std::vector<std::string>& values, const PlaybackFigures& figures);

 private:
  Family<Histogram>& first_audio_;
  Family<Histogram>& real_time_factor_;
  Family<Counter>& responses_;
  Family<Counter>& stalls_;
  Family<Counter>& stalled_seconds_;
  Family<Counter>& audio_seconds_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PLAYBACK_METRICS_H_
