// The `limits:` section of a pipeline config: what protects the orchestrator
// from its clients (admission, sizes, slow readers, connections). Part of
// pipeline_config; see docs/pipeline_config.md for each key.
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_LIMITS_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_LIMITS_H_

#include "absl/status/status.h"
#include "orchestrator/config/pipeline_config.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {

// Reads `node` (the value of `limits`) into `config`, leaving the defaults of
// keys it lacks. INVALID_ARGUMENT naming the field ("limits.max_in_flight: ...").
// yaml-cpp may throw; the caller catches.
absl::Status ReadLimits(const YAML::Node& node, PipelineConfig* config);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_LIMITS_H_
