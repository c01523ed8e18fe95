// What operators ask of the stages, apart from requests: their replicas' state
// and utility calls fanned out to a stage's replicas. Reads and calls the pools;
// touches no request. Run on the event loop that owns the pools.
//
//   v1::PipelineStatus status;
//   DescribeStages(config, pools, absl::Now(), &status);
//   CallStageUtility(config, pools, request, done);   // one result per replica
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ADMIN_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ADMIN_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

using StagePools = std::vector<std::shared_ptr<StagePool>>;

// Adds one StageStatus per stage, with its replicas, to `status`.
void DescribeStages(const PipelineConfig& config, const StagePools& pools, absl::Time now,
                    v1::PipelineStatus* status);

// Calls request.name() on every live replica of request.stage_id(). `done` gets
// one result per replica, in replica order (an error naming the stage and replica
// for a replica that is not alive or failed), or INVALID_ARGUMENT for a bad stage
// id or an empty name. The pools must outlive the call.
void CallStageUtility(const PipelineConfig& config, const StagePools& pools,
                      const v1::StageUtilityRequest& request,
                      std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_STAGE_ADMIN_H_
