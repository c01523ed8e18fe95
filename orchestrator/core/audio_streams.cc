#include "orchestrator/core/audio_streams.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

AudioStreams::AudioStreams(CoreParts core)
    : core_(core), capacity_(core.config->scaling.window), last_sample_(core.scheduler->Now()) {
  if (core.config->playback.audio_admission_percent == 0) return;
  for (const StageConfig& stage : core.config->stages) {
    auto lead = stage.engine_params.find("playback_lead_ms");
    if (lead == stage.engine_params.end() || lead->second == "0") continue;
    // Requests that sit out while ahead make audio come no faster than the
    // lead needs: the capacity measured from it is too low.
    LogWarning({"", stage.id, -1, ""},
               absl::StrCat("playback.audio_admission_percent is set and stage ", stage.name,
                            " has engine_params.playback_lead_ms ", lead->second,
                            ": the audio capacity will be measured too low, and admission will "
                            "hold requests the pipeline could serve (docs/engines.md, "
                            "\"Playback deadlines\")"));
  }
}

void AudioStreams::Sample() {
  const absl::Time now = core_.scheduler->Now();
  absl::flat_hash_map<std::string, double> heard;
  int streams = 0;
  double audio = 0;
  core_.table->ForEach([&](const InFlightRequest& r) {
    const PlaybackModel& playback = r.account.playback();
    if (!playback.heard()) return;
    heard[r.id] = playback.audio_seconds();
    // Played through the whole interval: heard at the last sample too.
    if (auto before = heard_.find(r.id); before != heard_.end()) {
      ++streams;
      audio += playback.audio_seconds() - before->second;
    }
  });
  capacity_.Sample(static_cast<double>(heard.size()), streams, audio, now - last_sample_);
  heard_ = std::move(heard);
  playing_ = static_cast<int>(heard_.size());
  last_sample_ = now;
}

int AudioStreams::Limit() const {
  const int percent = core_.config->playback.audio_admission_percent;
  const std::optional<double> streams = capacity_.Streams();
  if (percent == 0 || !streams.has_value()) return 0;
  return std::max(1, static_cast<int>(std::floor(*streams * percent / 100)));
}

bool AudioStreams::Full(const InFlightRequest* arriving) const {
  const int limit = Limit();
  if (limit == 0) return false;
  int running = core_.table->running_audio();
  if (arriving != nullptr && arriving->wants_audio && !arriving->queued) --running;
  return running >= limit;
}

v1::AudioCapacityStatus AudioStreams::Status() const {
  v1::AudioCapacityStatus status;
  status.set_playing(playing_);
  if (std::optional<double> streams = capacity_.Streams()) {
    status.set_capacity_known(true);
    status.set_capacity_streams(*streams);
  }
  status.set_seconds_per_audio_second(capacity_.last_seconds_per_audio_second());
  status.set_admission_limit(Limit());
  return status;
}

}  // namespace omnistage
