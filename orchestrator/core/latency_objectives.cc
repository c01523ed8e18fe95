#include "orchestrator/core/latency_objectives.h"

#include <algorithm>

namespace omnistage {

absl::Time ObjectiveDeadline(const v1::LatencyObjectives& objectives, bool wants_audio,
                             absl::Time admitted) {
  absl::Time deadline = absl::InfiniteFuture();
  if (objectives.first_output_ms() > 0) {
    deadline = std::min(deadline, admitted + absl::Milliseconds(objectives.first_output_ms()));
  }
  if (wants_audio && objectives.first_audio_ms() > 0) {
    deadline = std::min(deadline, admitted + absl::Milliseconds(objectives.first_audio_ms()));
  }
  return deadline;
}

v1::LatencyObjectives WithDefaults(v1::LatencyObjectives request, const ObjectiveDefaults& identity,
                                   const ObjectiveDefaults& pipeline, bool wants_audio) {
  if (request.first_output_ms() == 0) {
    request.set_first_output_ms(identity.first_output_ms > 0 ? identity.first_output_ms
                                                             : pipeline.first_output_ms);
  }
  if (request.first_audio_ms() == 0 && wants_audio) {
    request.set_first_audio_ms(identity.first_audio_ms > 0 ? identity.first_audio_ms
                                                           : pipeline.first_audio_ms);
  }
  if (request.between_outputs_ms() == 0) {
    request.set_between_outputs_ms(identity.between_outputs_ms > 0 ? identity.between_outputs_ms
                                                                   : pipeline.between_outputs_ms);
  }
  for (v1::Criticality fallback :
       {identity.criticality, pipeline.criticality, v1::CRITICALITY_STANDARD}) {
    if (request.criticality() != v1::CRITICALITY_UNSPECIFIED) break;
    request.set_criticality(fallback);
  }
  return request;
}

v1::ObjectiveOutcome JudgeObjective(uint32_t objective_ms, double first_seconds,
                                    double duration_seconds) {
  if (objective_ms == 0) return v1::OBJECTIVE_OUTCOME_NONE;
  const double due = objective_ms / 1000.0;
  if (first_seconds >= 0) {
    return first_seconds <= due ? v1::OBJECTIVE_OUTCOME_MET : v1::OBJECTIVE_OUTCOME_MISSED;
  }
  // Nothing came: late once it outlived the deadline, else not judged.
  return duration_seconds > due ? v1::OBJECTIVE_OUTCOME_MISSED : v1::OBJECTIVE_OUTCOME_NONE;
}

void JudgeObjectives(const v1::LatencyObjectives& objectives, v1::FinishedRequest* record) {
  record->set_first_output_objective(JudgeObjective(
      objectives.first_output_ms(), record->first_output_seconds(), record->duration_seconds()));
  record->set_first_audio_objective(JudgeObjective(
      objectives.first_audio_ms(), record->first_audio_seconds(), record->duration_seconds()));
  // Judged once two outputs came; a request that ended sooner had no gaps.
  if (objectives.between_outputs_ms() > 0 && record->between_outputs_seconds() > 0) {
    record->set_between_outputs_objective(record->between_outputs_seconds() <=
                                                  objectives.between_outputs_ms() / 1000.0
                                              ? v1::OBJECTIVE_OUTCOME_MET
                                              : v1::OBJECTIVE_OUTCOME_MISSED);
  }
  record->set_criticality(objectives.criticality());
}

}  // namespace omnistage
