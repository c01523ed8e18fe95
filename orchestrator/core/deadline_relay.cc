#include "orchestrator/core/deadline_relay.h"

namespace omnistage {

void DeadlineRelay::Delivered(InFlightRequest& r, absl::Time now) const {
  const absl::Time runs_out = r.account.playback().runs_out();
  if (runs_out == absl::InfiniteFuture()) return;  // No audio yet.
  if (r.deadline_sent != absl::InfinitePast() && runs_out - r.deadline_sent < kStep) return;
  r.deadline_sent = runs_out;
  for (int s = 0; s <= r.last_stage; ++s) {
    const StageProgress& stage = r.stages[s];
    if (stage.started && !stage.finished) core_.pool(s).SendPlaybackDeadline(r.id, runs_out - now);
  }
}

}  // namespace omnistage
