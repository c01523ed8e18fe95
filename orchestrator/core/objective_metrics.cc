#include "orchestrator/core/objective_metrics.h"

#include <cmath>
#include <string>
#include <utility>

namespace omnistage {

ObjectiveMetrics::ObjectiveMetrics(MetricsRegistry* registry)
    : outcomes_(registry->AddCounter(
          "omnistage_latency_objectives_total",
          "Requests' latency objectives judged as they ended: first_output or first_audio, met "
          "(it came within the objective) or missed (later, or never by the deadline).",
          {"objective", "outcome"})),
      goodput_(registry
                   ->AddCounter("omnistage_goodput_requests_total",
                                "Requests with a latency objective that met every objective "
                                "judged: rate() of it is the goodput.",
                                {})
                   .With({})),
      misses_(registry->AddCounter(
          "omnistage_objective_misses_total",
          "Latency objectives missed, by why (docs/observability.md, \"Latency objectives\"): "
          "predicted (to miss, at admission), queued (the admission queue took longer than "
          "predicted), slow_replica (a stage's replica took longer than predicted), "
          "mispredicted (neither alone explains it) or unpredicted (no prediction).",
          {"objective", "reason"})),
      errors_(registry->AddHistogram(
          "omnistage_latency_prediction_error_ratio",
          "The latency predictor's error, |predicted - actual| / actual: first_output and "
          "first_audio from admission (requests with an objective), queue_wait, and each "
          "stage's leads (stage_first_output, stage_done).",
          {"prediction", "stage"}, {0.05, 0.1, 0.25, 0.5, 1, 2, 5})) {
  for (const char* objective : {"first_output", "first_audio", "between_outputs"}) {
    for (const char* outcome : {"met", "missed"}) outcomes_.With({objective, outcome});
  }
}

void ObjectiveMetrics::Missed(const std::string& objective, const std::string& reason) {
  misses_.With({objective, reason}).Increment();
  ++(*tally_.mutable_misses())[reason];
}

void ObjectiveMetrics::PredictionError(const std::string& prediction, const std::string& stage,
                                       double predicted, double actual) {
  if (!(actual >= 1e-3)) return;
  errors_.With({prediction, stage}).Observe(std::abs(predicted - actual) / actual);
}

void ObjectiveMetrics::Ended(const v1::FinishedRequest& record) {
  bool judged = false;
  bool missed = false;
  for (const auto& [objective, outcome] :
       {std::pair<const char*, v1::ObjectiveOutcome>{"first_output",
                                                     record.first_output_objective()},
        {"first_audio", record.first_audio_objective()},
        {"between_outputs", record.between_outputs_objective()}}) {
    if (outcome == v1::OBJECTIVE_OUTCOME_NONE) continue;
    judged = true;
    missed = missed || outcome == v1::OBJECTIVE_OUTCOME_MISSED;
    outcomes_.With({objective, outcome == v1::OBJECTIVE_OUTCOME_MET ? "met" : "missed"})
        .Increment();
  }
  if (!judged) return;
  if (missed) {
    tally_.set_missed(tally_.missed() + 1);
    return;
  }
  goodput_.Increment();
  tally_.set_met(tally_.met() + 1);
}

}  // namespace omnistage
