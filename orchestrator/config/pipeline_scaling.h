// The `scaling:` section of a pipeline config: how the orchestrator measures
// each stage's autoscaling signal. Part of pipeline_config; see
// docs/pipeline_config.md for each key.
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_SCALING_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_SCALING_H_

#include "absl/status/status.h"
#include "orchestrator/config/pipeline_config.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {

// Reads `node` (the value of `scaling`) into `scaling`, leaving the defaults
// of keys it lacks. INVALID_ARGUMENT naming the field
// ("scaling.window_ms: ..."). yaml-cpp may throw; the caller catches.
absl::Status ReadScaling(const YAML::Node& node, ScalingConfig* scaling);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_PIPELINE_SCALING_H_
