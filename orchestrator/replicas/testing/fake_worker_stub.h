// FakeWorkerStub: a WorkerStub driven by hand, for the replica session's tests.
//
//   FakeWorkerStub stub;
//   session.Start();                       // stub.streams().size() == 1
//   FakeWorkerStub::Stream& s = stub.stream(0);
//   s.written[0].hello()...;               // what the session wrote
//   s.Event(ready);                        // the worker answers
//   s.End(absl::UnavailableError("gone")); // the stream breaks
//   stub.aborts()[0].request; stub.CompleteAbort(0, response);
//
// Callbacks run on the calling (test) thread. Not thread-safe.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_TESTING_FAKE_WORKER_STUB_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_TESTING_FAKE_WORKER_STUB_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/replicas/worker_stub.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class FakeWorkerStub : public WorkerStub {
 public:
  // One Connect stream, as the test sees it.
  class Stream : public WorkerStream {
   public:
    absl::Status Write(v1::WorkerCommand&& command) override;
    void Close() override { closed = true; }
    void Cancel() override { cancelled = true; }

    // The worker sends `event`.
    void Event(v1::WorkerEvent event) { on_event(event); }
    // The stream ends with `status`; later writes are refused.
    void End(absl::Status status);

    std::vector<v1::WorkerCommand> written;
    // While true, Write() refuses as a stream that broke would.
    bool broken = false;
    bool closed = false;
    bool cancelled = false;
    bool ended = false;
    EventCallback on_event;
    DoneCallback on_done;
  };

  struct AbortCall {
    v1::WorkerAbortRequest request;
    absl::Time deadline;
    std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done;
  };

  std::shared_ptr<WorkerStream> Connect(EventCallback on_event, DoneCallback on_done) override;
  void Abort(const v1::WorkerAbortRequest& request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done) override;
  void Shutdown() override {}

  size_t stream_count() const { return streams_.size(); }
  Stream& stream(size_t i) { return *streams_[i]; }
  Stream& last_stream() { return *streams_.back(); }
  std::vector<AbortCall>& aborts() { return aborts_; }

 private:
  std::vector<std::shared_ptr<Stream>> streams_;
  std::vector<AbortCall> aborts_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_TESTING_FAKE_WORKER_STUB_H_
