// omni status: the pipeline's status once, or again every --interval_s with
// --watch until Ctrl-C; as a table for people (status_table.h) or, with
// --json, as the PipelineStatus's JSON for programs.
//
// Watching on a terminal, each refresh clears the screen first; off one
// (a pipe, a file) the refreshes follow each other, each after a line
// "--- <UTC time>". A failed call is said where the status would be, and
// watching goes on (the orchestrator may be restarting).
#ifndef OMNISTAGE_CLIENT_STATUS_COMMAND_H_
#define OMNISTAGE_CLIENT_STATUS_COMMAND_H_

#include <atomic>
#include <functional>

#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

struct StatusOptions {
  // Ask every orchestrator sharing the workers (--cluster).
  bool cluster = false;
  // The JSON instead of the table (--json).
  bool json = false;
  // Refresh until `interrupted` (--watch), every `interval_s` seconds.
  bool watch = false;
  double interval_s = 2;
  // Sets each call's deadline and token.
  std::function<void(grpc::ClientContext*)> prepare;
};

// Prints to stdout, errors to stderr. Returns the exit code: kOk; kError when
// the (single) call failed; with watch, kOk once `interrupted` is set.
int RunStatus(v1::Orchestrator::StubInterface& stub, const StatusOptions& options,
              const std::atomic<bool>& interrupted);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_STATUS_COMMAND_H_
