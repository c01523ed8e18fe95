// The latency objectives a request gets when it sets none
// (GenerateRequest.objectives; docs/architecture.md, "Latency objectives"):
// an identity's (the tokens file) before the pipeline's (its config), each
// an `objectives:` map of first_output_ms, first_audio_ms,
// between_outputs_ms and criticality (critical, standard or sheddable).
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_OBJECTIVE_DEFAULTS_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_OBJECTIVE_DEFAULTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "protos/orchestrator.pb.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {

// In milliseconds from admission; 0: none.
struct ObjectiveDefaults {
  uint32_t first_output_ms = 0;
  uint32_t first_audio_ms = 0;
  uint32_t between_outputs_ms = 0;
  // UNSPECIFIED: none.
  v1::Criticality criticality = v1::CRITICALITY_UNSPECIFIED;
};

// Reads `node` (an `objectives:` map at `path`) into `defaults`: each key a
// whole number of milliseconds in [0, 600000] but criticality.
// INVALID_ARGUMENT naming the field ("tokens[2].objectives.first_output_ms: ..."). yaml-cpp may
// throw; the caller catches.
absl::Status ReadObjectiveDefaults(const YAML::Node& node, const std::string& path,
                                   ObjectiveDefaults* defaults);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_OBJECTIVE_DEFAULTS_H_
