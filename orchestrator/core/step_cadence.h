// StepCadence: one replica's engine step period, learned from the step
// events its worker sends (StepOutputs.step), and where in its current step
// the engine is now (docs/architecture.md, "Latency objectives"). A request
// sent to a busy engine joins at the next step, so its first output comes a
// whole step after the current one ends: the latency predictor takes "until
// the current step ends" as one of a lead's features.
//
// The period is a moving average of the gaps between back-to-back steps
// (step n+1 seen after step n, which left the engine requests to run): a
// gap spanning steps this orchestrator did not see, or time the engine sat
// idle, says nothing of one step's length. Times are when the events were
// handled, so they include their way here: an event is never early, only
// more or less delayed, and the phase follows the least delayed events of a
// run of steps without a pause (a step end at the time one was handled; a
// later event moves it a tenth of the way).
//
//   StepCadence cadence;
//   cadence.Step(outputs.step(), now, outputs.load().requests() > 0);
//   double s = cadence.UntilStepEnds(now);           // 0 while unknown
//
// Not thread-safe: owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_STEP_CADENCE_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_STEP_CADENCE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace omnistage {

class StepCadence {
 public:
  // The event of engine step `step` (1-based; 0: not from a step, ignored)
  // was handled at `at`; `busy`: the engine held requests after it. A step
  // number below the last one is a new engine (the replica was replaced):
  // what was learned is forgotten.
  void Step(uint64_t step, absl::Time at, bool busy);
  // The learned step period in seconds; 0 while no back-to-back steps were
  // seen.
  double period() const { return period_; }
  // Seconds from `now` until the engine's current step ends, as the steps
  // seen so far keep their period; 0 while the period is unknown.
  double UntilStepEnds(absl::Time now) const;

 private:
  uint64_t last_step_ = 0;
  absl::Time last_at_ = absl::InfinitePast();
  bool last_busy_ = false;
  double period_ = 0;
  // A step end as the phase puts it: step `phase_step_` ended at `phase_at_`.
  uint64_t phase_step_ = 0;
  absl::Time phase_at_ = absl::InfinitePast();
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_STEP_CADENCE_H_
