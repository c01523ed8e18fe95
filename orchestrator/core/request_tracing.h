// RequestTracing: the orchestrator's spans of each request
// (docs/observability.md, "Traces"), all in the trace of the client's
// traceparent (a new trace without one):
//
//   Generate | GenerateDuplex (server)   admission to the terminal: identity,
//                                        priority, output tokens, finish
//                                        reason; events abort_requested,
//                                        cancelled; an error status for a
//                                        failure
//     admission queue (internal)         while it waits there
//     stage <name> (client)              from its send to the stage to the
//                                        stage's last output: replica,
//                                        instance; events first_output,
//                                        failover (from, to, why); its
//                                        context is the traceparent the
//                                        worker gets, so the worker's span
//                                        is its child
//
// Spans are started and ended on the core's loop and handed to the tracer's
// exporter (batched off the loop). With tracing off nothing is started.
//
//   RequestTracing tracing(tracer, core);
//   tracing.Admitted(r, "Generate");
//   add.set_traceparent(tracing.StageStarting(r, stage));
//   ...
//   tracing.Ended(r, record);
//
// Not thread-safe: owned by the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TRACING_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TRACING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/tracing/tracer.h"
#include "orchestrator/core/core_parts.h"
#include "orchestrator/core/request_table.h"
#include "protos/orchestrator.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class RequestTracing {
 public:
  // `tracer` (not owned; null: off) outlives this.
  RequestTracing(const Tracer* tracer, CoreParts core);

  void set_tracer(const Tracer* tracer) { tracer_ = tracer; }
  bool enabled() const { return tracer_ != nullptr && tracer_->enabled(); }

  // `r` was admitted through `method` (r.traceparent is the client's).
  void Admitted(InFlightRequest& r, absl::string_view method, int priority);
  void Queued(InFlightRequest& r);
  void LeftQueue(InFlightRequest& r);
  // It was refused before it started anywhere.
  void Refused(InFlightRequest& r, const absl::Status& error);
  // Stage `stage` of `r` is about to be sent: its span starts (a running
  // one goes on). The traceparent its worker gets.
  std::string StageStarting(InFlightRequest& r, int stage);
  // The send went to `replica`, or failed with `error`.
  void StageSent(InFlightRequest& r, int stage, int replica);
  void StageNotSent(InFlightRequest& r, int stage, absl::string_view error);
  void StageOutput(InFlightRequest& r, int stage, const v1::RequestOutput& output);
  // The stage before `stage` handed it its last input (a hand-off done).
  void InputComplete(InFlightRequest& r, int stage);
  // `stage` was lost on `from` and resumed on the replica it is bound to
  // now.
  void FailedOver(InFlightRequest& r, int stage, int from, absl::string_view why);
  void AbortRequested(InFlightRequest& r, absl::string_view by);
  void Cancelled(InFlightRequest& r);
  // Every span still running ends, the call's with what `record` says.
  void Ended(InFlightRequest& r, const v1::FinishedRequest& record);

 private:
  absl::Time Now() const { return core_.scheduler->Now(); }
  // `r`'s running span of `stage`; null when none runs.
  static InFlightRequest::StageSpan* StageSpanOf(InFlightRequest& r, int stage);

  const Tracer* tracer_;
  const CoreParts core_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_TRACING_H_
