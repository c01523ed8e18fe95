// RequestSpans: the worker's span of each request it runs
// (docs/observability.md, "Traces"): "engine" (server), a child of the
// orchestrator's stage span (the AddRequest's traceparent), from the Add to
// the request's end, with its life in the EngineCore loop as events and
// attributes, never a span per step:
//   events taken (the engine took it: the wait for the loop ends there),
//          first_output, aborted;
//   attributes omnistage.stage_id, omnistage.instance_id, omnistage.engine,
//          omnistage.session, omnistage.steps (the steps that gave it
//          output), gen_ai.response.finish_reasons; an error status for a
//          failure.
// With tracing off every call returns at once.
//
//   RequestSpans spans(tracer, {stage_id, instance_id, engine_name});
//   spans.Added(session, id, add.traceparent());
//   spans.Output(session, output);              // after each step, per output
//   spans.Ended(session, id, v1::FINISH_REASON_ABORT, "");
//
// Thread-safe: commands arrive on the sessions' threads, outputs on the loop.
#ifndef OMNISTAGE_STAGE_WORKER_REQUEST_SPANS_H_
#define OMNISTAGE_STAGE_WORKER_REQUEST_SPANS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/tracing/tracer.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class RequestSpans {
 public:
  // What every span says of the worker.
  struct Identity {
    int stage_id = 0;
    std::string instance_id;
    std::string engine;
  };

  // `tracer` (not owned; null: off) outlives this.
  RequestSpans(const Tracer* tracer, Identity identity);

  bool enabled() const { return tracer_ != nullptr && tracer_->enabled(); }

  // Request `id` of session `session` was added, under `traceparent` (and
  // its `tracestate`).
  void Added(uint64_t session, const std::string& id, const std::string& traceparent,
             const std::string& tracestate = "");
  void Taken(uint64_t session, const std::string& id);
  // One step's output for it (its id the session's); ends it when finished.
  void Output(uint64_t session, const v1::RequestOutput& output);
  // It ended otherwise (an abort, a rejection, a stall): `error` empty
  // unless it failed.
  void Ended(uint64_t session, const std::string& id, v1::FinishReason reason,
             const std::string& error);
  // Session `session` closed: what still runs of it ends as aborted.
  void SessionClosed(uint64_t session);

 private:
  struct Running {
    Span span;
    int64_t steps = 0;
    bool output = false;
  };
  using Key = std::pair<uint64_t, std::string>;
  // Ends a span taken out of running_ (outside the lock: the exporter has
  // its own).
  void End(Running& running, v1::FinishReason reason, const std::string& error);

  const Tracer* const tracer_;
  const Identity identity_;
  absl::Mutex mu_;
  absl::flat_hash_map<Key, Running> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_REQUEST_SPANS_H_
