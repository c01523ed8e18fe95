// CoreParts: what PipelineCore's collaborators (start_queue.h, failover.h,
// streamed_input.h) use of it. None of it is owned; all of it outlives them.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_CORE_PARTS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_CORE_PARTS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/common.pb.h"

namespace omnistage {

struct CoreParts {
  const PipelineConfig* config = nullptr;
  RequestTable* table = nullptr;
  // Per stage.
  const std::vector<std::shared_ptr<StagePool>>* pools = nullptr;
  PipelineMetrics* metrics = nullptr;
  // The core's loop: every call comes from it, every timer runs on it.
  Scheduler* scheduler = nullptr;

  const StageConfig& stage(int s) const { return config->stages[s]; }
  StagePool& pool(int s) const { return *(*pools)[s]; }
};

// Ends the requests `ids` with `error` (each once; ids that ended already are
// skipped).
using FailRequestsFn =
    std::function<void(const std::vector<std::string>& ids, const v1::Error& error)>;

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_CORE_PARTS_H_
