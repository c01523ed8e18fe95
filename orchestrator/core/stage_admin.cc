#include "orchestrator/core/stage_admin.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "orchestrator/core/stage_error.h"

namespace omnistage {

void DescribeStages(const PipelineConfig& config, const StagePools& pools, absl::Time now,
                    v1::PipelineStatus* status) {
  for (size_t s = 0; s < config.stages.size(); ++s) {
    const StageConfig& stage_config = config.stages[s];
    v1::StageStatus* stage = status->add_stages();
    stage->set_stage_id(static_cast<int>(s));
    stage->set_name(stage_config.name);
    stage->set_engine(stage_config.engine);
    stage->set_output_modality(stage_config.output_modality);
    stage->set_final_output(stage_config.final_output);
    pools[s]->AppendStatus(stage, now);
  }
}

void CallStageUtility(const PipelineConfig& config, const StagePools& pools,
                      const v1::StageUtilityRequest& request,
                      std::function<void(absl::StatusOr<v1::StageUtilityResponse>)> done) {
  const int stage = request.stage_id();
  if (stage < 0 || stage >= static_cast<int>(pools.size())) {
    done(absl::InvalidArgumentError(absl::StrCat("stage_id: no stage ", stage,
                                                 " (the pipeline has ", pools.size(), ")")));
    return;
  }
  if (request.name().empty()) {
    done(absl::InvalidArgumentError("name: empty utility name"));
    return;
  }
  std::shared_ptr<StagePool> pool = pools[stage];
  pool->CallUtility(
      request.name(), request.args(),
      [&stage_config = config.stages[stage], pool,
       done = std::move(done)](UtilityResults results) {
        v1::StageUtilityResponse response;
        for (auto& [r, value] : results) {
          v1::ReplicaUtilityResult* result = response.add_results();
          result->set_replica(r);
          result->set_address(pool->state(r).address);
          if (value.ok()) {
            *result->mutable_value() = *std::move(value);
          } else {
            *result->mutable_error() = StageError(value.status().code(), stage_config, *pool, r,
                                                  value.status().message());
          }
        }
        done(std::move(response));
      });
}

}  // namespace omnistage
