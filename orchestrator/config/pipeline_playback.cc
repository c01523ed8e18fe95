#include "orchestrator/config/pipeline_playback.h"

#include <cstdint>

#include "orchestrator/config/yaml_fields.h"

namespace omnistage {

absl::Status ReadPlayback(const YAML::Node& node, PlaybackConfig* playback) {
  yaml::Fields fields(node, "playback", {"jitter_buffer_ms", "audio_admission_percent"});
  int64_t jitter_ms = absl::ToInt64Milliseconds(playback->jitter_buffer);
  fields.Int("jitter_buffer_ms", 0, 60000, &jitter_ms, "a number of milliseconds");
  playback->jitter_buffer = absl::Milliseconds(jitter_ms);
  int64_t percent = playback->audio_admission_percent;
  fields.Int("audio_admission_percent", 0, 100, &percent);
  playback->audio_admission_percent = static_cast<int>(percent);
  return fields.status();
}

}  // namespace omnistage
