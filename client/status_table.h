// How `omni status` shows a pipeline's status to people: one table per stage
// (its replicas: index, address, state, load, bound requests, last error), the
// stage's autoscaling signal when the orchestrator reports one, and the
// orchestrator's own figures (node id, accepting, in flight, the admission
// queue; with --cluster, every orchestrator), and the requests it finished
// last (at most kRecentShown). `omni status --json` prints the
// PipelineStatus as JSON instead, for programs.
//
//   orchestrator 7f3a: accepting, 2 in flight, 0 queued
//
//   stage 0 thinker (engine thinker)
//     replica  address          state  load  bound  last error
//     0        127.0.0.1:40123  live   2/64  2
//
// Pure formatting: no I/O, so the unit test builds a PipelineStatus by hand.
#ifndef OMNISTAGE_CLIENT_STATUS_TABLE_H_
#define OMNISTAGE_CLIENT_STATUS_TABLE_H_

#include <string>

#include "protos/orchestrator.pb.h"

namespace omnistage {

// A last_error longer than this is cut, ending in "...", so that a row stays
// on one line (the whole message is in `omni status --json`).
inline constexpr int kMaxErrorChars = 60;
// Of PipelineStatus.recent, the newest this many are shown.
inline constexpr int kRecentShown = 5;

// The status as text for a terminal, ending with a newline.
std::string FormatStatusTable(const v1::PipelineStatus& status);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_STATUS_TABLE_H_
