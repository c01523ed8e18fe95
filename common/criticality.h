// Criticality names as configs, headers, the CLI and logs spell them:
// "critical", "standard", "sheddable" (GenerateRequest.objectives.criticality;
// docs/architecture.md, "Latency objectives").
#ifndef OMNISTAGE_COMMON_CRITICALITY_H_
#define OMNISTAGE_COMMON_CRITICALITY_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// "critical", "standard" or "sheddable" (any case) as a Criticality; nullopt
// for anything else.
std::optional<v1::Criticality> ParseCriticality(absl::string_view name);

// Its lower-case name; "" for UNSPECIFIED (and values out of the enum).
const char* CriticalityName(v1::Criticality criticality);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_CRITICALITY_H_
