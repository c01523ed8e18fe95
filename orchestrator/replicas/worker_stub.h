// WorkerStub: the transport under a replica session, in the style of an abstract
// gRPC stub: one worker's Connect streams and unary Abort calls. The gRPC
// implementation is grpc_worker_stub.h; tests drive FakeWorkerStub by hand.
//
// Every callback runs on the orchestrator's event loop (Scheduler::InLoop()):
// an implementation posts it there, or runs it as the loop's owner
// (RunOrPost). A stream's on_done runs once, last; Abort's `done` runs once.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_WORKER_STUB_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_WORKER_STUB_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

// The client side of one Connect stream.
class WorkerStream {
 public:
  virtual ~WorkerStream() = default;
  // Queues `command` behind those written before, moving from it. UNAVAILABLE
  // once the stream is ending (it broke, or Close() was called): nothing was
  // sent and `command` is left as it was.
  virtual absl::Status Write(v1::WorkerCommand&& command) = 0;
  // No more writes; the stream ends once the worker ends it.
  virtual void Close() = 0;
  // Breaks the stream now; on_done follows with CANCELLED.
  virtual void Cancel() = 0;
};

class WorkerStub {
 public:
  // The handler may move from the event's parts; the event is freed after it.
  using EventCallback = std::function<void(v1::WorkerEvent&)>;
  using DoneCallback = std::function<void(absl::Status)>;

  virtual ~WorkerStub() = default;
  // Opens a Connect stream: every event the worker sends goes to `on_event`, and
  // `on_done` gets the stream's final status.
  virtual std::shared_ptr<WorkerStream> Connect(EventCallback on_event, DoneCallback on_done) = 0;
  // The unary Abort; fails with DEADLINE_EXCEEDED at `deadline`.
  virtual void Abort(const v1::WorkerAbortRequest& request, absl::Time deadline,
                     std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done) = 0;
  // Cancels every stream and call, then waits until the transport calls back no
  // more. Call from any thread once the event loop has stopped.
  virtual void Shutdown() = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_WORKER_STUB_H_
