// A request's latency objectives (GenerateRequest.objectives;
// docs/architecture.md, "Latency objectives"): the deadline it carries into
// the admission queue, and how each objective went once it ended.
//
//   queued.deadline = ObjectiveDeadline(r.objectives, r.wants_audio, admitted);
//   JudgeObjectives(r.objectives, &record);   // record: FinishedRequest
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_OBJECTIVES_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_OBJECTIVES_H_

#include <cstdint>

#include "absl/time/time.h"
#include "common/limits.h"
#include "orchestrator/config/objective_defaults.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// The earliest of its objectives' deadlines, counted from `admitted` (the
// first audio's only for a request that gets audio); InfiniteFuture without
// one.
absl::Time ObjectiveDeadline(const v1::LatencyObjectives& objectives, bool wants_audio,
                             absl::Time admitted);

// `request`'s objectives, each it leaves 0 (unspecified) taken from
// `identity`'s, then `pipeline`'s; the first audio's only for a request that
// gets audio; a criticality none of them sets is standard.
v1::LatencyObjectives WithDefaults(v1::LatencyObjectives request, const ObjectiveDefaults& identity,
                                   const ObjectiveDefaults& pipeline, bool wants_audio);

// How an objective of `objective_ms` went for a request whose first output of
// that kind came `first_seconds` after admission (-1: none) and that ended
// `duration_seconds` after it.
v1::ObjectiveOutcome JudgeObjective(uint32_t objective_ms, double first_seconds,
                                    double duration_seconds);

// Sets `record`'s outcomes from its first output and audio times, its mean
// time between outputs and its duration, and its criticality.
void JudgeObjectives(const v1::LatencyObjectives& objectives, v1::FinishedRequest* record);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_LATENCY_OBJECTIVES_H_
