// ObjectiveMetrics: how requests' latency objectives went
// (latency_objectives.h; docs/observability.md, "Latency objectives"), as
// Prometheus counters: per objective, met and missed, and the goodput, the
// requests with an objective that met every one judged.
//
//   ObjectiveMetrics objectives(&registry);
//   objectives.Ended(record);   // every request, as it ends
//
// Thread-safe, as the registry's counters.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_

#include "common/metrics.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class ObjectiveMetrics {
 public:
  explicit ObjectiveMetrics(MetricsRegistry* registry);

  // `record`'s outcomes (JudgeObjectives), counted.
  void Ended(const v1::FinishedRequest& record);

 private:
  Family<Counter>& outcomes_;
  Counter& goodput_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_
