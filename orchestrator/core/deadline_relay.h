// DeadlineRelay: passes each request's playback deadline on to the stages
// still running it (docs/architecture.md, "Playback deadlines").
//
// A request's deadline is when its listener runs out of the audio it got
// (RequestAccount::playback().runs_out()). Each time its client gets audio
// that moves the deadline by kStep or more since the stages last heard it,
// every stage that runs the request and has not finished it hears how long
// is left (StagePool::SendPlaybackDeadline), so an engine can put a request
// whose listener is about to run out before one that is seconds ahead. A
// request that has not started playing is never named: stages treat it as
// the most urgent. Between updates the deadline a stage holds is at most kStep
// early: a little more urgent than it is, never less.
//
// Not thread-safe: runs on the core's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_DEADLINE_RELAY_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_DEADLINE_RELAY_H_

#include "absl/time/time.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/request_table.h"

namespace omnistage {

class DeadlineRelay {
 public:
  static constexpr absl::Duration kStep = absl::Milliseconds(250);

  explicit DeadlineRelay(CoreParts core) : core_(core) {}

  // `r`'s client got output at `now` (after its account counted it).
  void Delivered(InFlightRequest& r, absl::Time now) const;

 private:
  const CoreParts core_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_DEADLINE_RELAY_H_
