// The `playback:` section of a pipeline config: the listener the audio
// figures are measured against (docs/observability.md, "How a listener hears
// it"). Part of pipeline_config; see docs/pipeline_config.md for each key.
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_PLAYBACK_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_PLAYBACK_H_

#include "absl/status/status.h"
#include "orchestrator/config/pipeline_config.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {

// Reads `node` (the value of `playback`) into `playback`, leaving the
// defaults of keys it lacks. INVALID_ARGUMENT naming the field
// ("playback.jitter_buffer_ms: ..."). yaml-cpp may throw; the caller catches.
absl::Status ReadPlayback(const YAML::Node& node, PlaybackConfig* playback);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_PLAYBACK_H_
