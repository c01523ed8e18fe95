// Errors that arise at a stage, named the way operators read them:
// "stage 1 (talker) replica 0 died: connection reset", with the stage, replica and
// the replica's instance id in the v1::Error fields.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ERROR_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/common.pb.h"

namespace omnistage {

// "stage <id> (<name>)[ replica <r>] <what>", code `code`; replica -1 when no
// replica was involved. The instance id is the replica's current one.
v1::Error StageError(absl::StatusCode code, const StageConfig& stage, const StagePool& pool,
                     int replica, absl::string_view what);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ERROR_H_
