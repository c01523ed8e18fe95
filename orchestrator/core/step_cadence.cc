#include "orchestrator/core/step_cadence.h"

#include <cmath>

namespace omnistage {
namespace {

// Each back-to-back gap's weight in the period: events handled in a batch
// come close together and the next gap is longer, so one gap alone is noisy.
constexpr double kGapWeight = 0.1;
// How far the phase moves toward an event that came later than the beat
// said: an event is never early, only delayed on its way, so the least
// delayed ones set the phase, and this lets it follow a period a little off.
constexpr double kLateWeight = 0.1;

}  // namespace

void StepCadence::Step(uint64_t step, absl::Time at, bool busy) {
  if (step == 0) return;
  if (step < last_step_) period_ = 0;
  if (step == last_step_ + 1 && last_step_ > 0 && last_busy_) {
    const double gap = absl::ToDoubleSeconds(at - last_at_);
    if (gap >= 0) period_ = period_ > 0 ? period_ + kGapWeight * (gap - period_) : gap;
  }
  // The engine stepped without a pause since the phase was set: the beat
  // goes on from it. Otherwise (idle in between, a new engine) this event
  // sets it.
  if (period_ > 0 && last_busy_ && step > phase_step_ && phase_step_ > 0) {
    const absl::Time beat =
        phase_at_ + absl::Seconds(period_ * static_cast<double>(step - phase_step_));
    phase_at_ = at < beat ? at : beat + kLateWeight * (at - beat);
  } else {
    phase_at_ = at;
  }
  phase_step_ = step;
  last_step_ = step;
  last_at_ = at;
  last_busy_ = busy;
}

double StepCadence::UntilStepEnds(absl::Time now) const {
  if (period_ <= 0) return 0;
  const double since = absl::ToDoubleSeconds(now - phase_at_);
  if (since < 0) return period_;
  return period_ - std::fmod(since, period_);
}

}  // namespace omnistage
