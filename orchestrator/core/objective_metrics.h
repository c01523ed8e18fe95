// ObjectiveMetrics: how requests' latency objectives went
// (latency_objectives.h; docs/observability.md, "Latency objectives"), as
// Prometheus counters: per objective, met and missed, the misses by reason,
// and the goodput, the requests with an objective that met every one judged;
// and the latency predictor's error, as a histogram of
// |predicted - actual| / actual per prediction (objective_planner.h).
//
//   ObjectiveMetrics objectives(&registry);
//   objectives.Ended(record);   // every request, as it ends
//
// Not thread-safe (the tally): owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_

#include <string>

#include "common/metrics.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class ObjectiveMetrics {
 public:
  explicit ObjectiveMetrics(MetricsRegistry* registry);

  // `record`'s outcomes (JudgeObjectives), counted.
  void Ended(const v1::FinishedRequest& record);
  // An `objective` ("first_output", ...) was missed for `reason`.
  void Missed(const std::string& objective, const std::string& reason);
  // The predictor said `predicted` seconds of what took `actual`:
  // `prediction` is first_output, first_audio, queue_wait,
  // stage_first_output or stage_done (these two with their `stage`'s name).
  // Actual times under a millisecond are not counted (the ratio means
  // nothing there).
  void PredictionError(const std::string& prediction, const std::string& stage, double predicted,
                       double actual);
  // A sheddable request was refused or ended, predicted to miss.
  void Shed() { tally_.set_shed(tally_.shed() + 1); }
  // Since start (PipelineStatus.objectives).
  const v1::ObjectiveTally& tally() const { return tally_; }

 private:
  Family<Counter>& outcomes_;
  Counter& goodput_;
  Family<Counter>& misses_;
  Family<Histogram>& errors_;
  v1::ObjectiveTally tally_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_OBJECTIVE_METRICS_H_
