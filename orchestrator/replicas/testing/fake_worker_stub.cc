#include "orchestrator/replicas/testing/fake_worker_stub.h"

#include <utility>

namespace omnistage {

absl::Status FakeWorkerStub::Stream::Write(v1::WorkerCommand&& command) {
  if (broken || ended || closed) return absl::UnavailableError("session closed");
  written.push_back(std::move(command));
  return absl::OkStatus();
}

void FakeWorkerStub::Stream::End(absl::Status status) {
  ended = true;
  on_done(std::move(status));
}

std::shared_ptr<WorkerStream> FakeWorkerStub::Connect(EventCallback on_event,
                                                      DoneCallback on_done) {
  auto stream = std::make_shared<Stream>();
  stream->on_event = std::move(on_event);
  stream->on_done = std::move(on_done);
  streams_.push_back(stream);
  return stream;
}

void FakeWorkerStub::Abort(const v1::WorkerAbortRequest& request, absl::Time deadline,
                           std::function<void(absl::StatusOr<v1::WorkerAbortResponse>)> done) {
  aborts_.push_back(AbortCall{request, deadline, std::move(done)});
}

}  // namespace omnistage
