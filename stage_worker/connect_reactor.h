// ConnectReactor: the server side of one StageWorker.Connect stream, a thin
// reactor over a Worker.
//
// Before the Hello it answers alone: a refused Hello gets a CommandRejected,
// then the stream ends with the error. After it, each command read becomes one
// call on the Worker, and the writes and the stream's end are driven by the
// ConnectSession (it is the ConnectSession's EventTransport).
//
// Every stream ends, whatever the Worker is doing (docs/stage_worker.md,
// "Shutdown"):
// - It reaches the Worker through a Revocable that the Worker revokes as it is
//   destroyed; a stream that outlives its Worker ends with UNAVAILABLE on its
//   own and never touches it.
// - A Hello whose stage defaults the engine checks on the busy loop waits for
//   that check; if the call is cancelled meanwhile (the client left, or the
//   server shuts down), the stream ends at once, and the check's answer, when
//   it comes, finds the reactor still allocated and is dropped.
//
// Created by StageWorkerService::Connect; deletes itself.
#ifndef OMNISTAGE_STAGE_WORKER_CONNECT_REACTOR_H_
#define OMNISTAGE_STAGE_WORKER_CONNECT_REACTOR_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/revocable.h"
#include "grpcpp/grpcpp.h"
#include "protos/stage_worker.grpc.pb.h"
#include "stage_worker/connect_session.h"
#include "stage_worker/worker.h"

namespace omnistage {

class ConnectReactor final : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>,
                             public EventTransport {
 public:
  // What a stream hears once the Worker that served it is gone.
  static absl::Status WorkerGone();

  ConnectReactor(std::shared_ptr<Revocable<Worker>> worker, grpc::CallbackServerContext* context);

  // grpc::ServerBidiReactor.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { Unref(); }

  // EventTransport.
  void BeginWrite(const v1::WorkerEvent* event) override { StartWrite(event); }
  void FinishStream(const absl::Status& status) override;
  void CancelStream() override { context_->TryCancel(); }

 private:
  enum class HelloCheck { kNone, kWaiting, kAnswered, kCancelled };

  void OnHello(bool ok);
  // The loop's answer to the Hello's check (`refused` OK: passed).
  void OnHelloChecked(const std::shared_ptr<ConnectSession>& opened, const absl::Status& refused);
  // Says which field was refused, then ends the stream with the same error
  // (only the error once the worker is gone).
  void RefuseHello(const absl::Status& status);
  // Held by gRPC until OnDone and by a pending Hello check until it answers.
  void Unref();

  const std::shared_ptr<Revocable<Worker>> worker_;
  grpc::CallbackServerContext* const context_;
  std::atomic<int> refs_{1};
  v1::WorkerCommand command_;
  // Set once, when the Hello's check passed, before the session's first write;
  // reads are sequential, so no lock is needed.
  std::shared_ptr<ConnectSession> session_;
  // A refused Hello: the event saying so, and the stream's final status.
  v1::WorkerEvent refusal_event_;
  absl::Status refusal_;

  absl::Mutex mu_;
  HelloCheck check_ ABSL_GUARDED_BY(mu_) = HelloCheck::kNone;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_CONNECT_REACTOR_H_
