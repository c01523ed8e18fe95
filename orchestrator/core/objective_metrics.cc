#include "orchestrator/core/objective_metrics.h"

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
                   .With({})) {
  for (const char* objective : {"first_output", "first_audio"}) {
    for (const char* outcome : {"met", "missed"}) outcomes_.With({objective, outcome});
  }
}

void ObjectiveMetrics::Ended(const v1::FinishedRequest& record) {
  bool judged = false;
  bool missed = false;
  for (const auto& [objective, outcome] : {std::pair<const char*, v1::ObjectiveOutcome>{
                                               "first_output", record.first_output_objective()},
                                           {"first_audio", record.first_audio_objective()}}) {
    if (outcome == v1::OBJECTIVE_OUTCOME_NONE) continue;
    judged = true;
    missed = missed || outcome == v1::OBJECTIVE_OUTCOME_MISSED;
    outcomes_.With({objective, outcome == v1::OBJECTIVE_OUTCOME_MET ? "met" : "missed"})
        .Increment();
  }
  if (judged && !missed) goodput_.Increment();
}

}  // namespace omnistage
