#include "stage_worker/connect_reactor.h"

#include <optional>
#include <utility>

#include "common/error_proto.h"
#include "common/grpc/grpc_util.h"

namespace omnistage {

absl::Status ConnectReactor::WorkerGone() {
  return absl::UnavailableError("stage worker is shutting down");
}

ConnectReactor::ConnectReactor(std::shared_ptr<Revocable<Worker>> worker,
                               grpc::CallbackServerContext* context)
    : worker_(std::move(worker)), context_(context) {
  StartRead(&command_);
}

void ConnectReactor::OnReadDone(bool ok) {
  if (session_ == nullptr) {
    OnHello(ok);
    return;
  }
  if (!ok) {
    // The client closed its side or the stream broke: no orphan work.
    worker_->With([this](Worker& worker) { worker.CloseSession(*session_); });
    session_->End(absl::OkStatus());
    return;
  }
  if (!worker_->With([this](Worker& worker) { worker.HandleCommand(*session_, command_); })) {
    // The worker and its requests are gone; nothing more is read.
    session_->End(WorkerGone());
    return;
  }
  command_.Clear();
  StartRead(&command_);
}

void ConnectReactor::OnWriteDone(bool ok) {
  if (session_ == nullptr) {
    Finish(ToGrpcStatus(refusal_));  // The refusal of the Hello is written.
    return;
  }
  session_->OnWriteDone(ok);
}

void ConnectReactor::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    if (check_ != HelloCheck::kWaiting) return;  // A read or a write fails instead.
    check_ = HelloCheck::kCancelled;
  }
  Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                      "cancelled while the Hello waited for the worker's engine loop"));
}

void ConnectReactor::FinishStream(const absl::Status& status) { Finish(ToGrpcStatus(status)); }

void ConnectReactor::OnHello(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  if (!command_.has_hello()) {
    Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first command of a session must be hello"));
    return;
  }
  absl::StatusOr<std::shared_ptr<ConnectSession>> session = WorkerGone();
  worker_->With([&](Worker& worker) {
    session = worker.OpenSession(command_.hello(), command_.seq(), this, PeerIdentity(*context_));
  });
  if (!session.ok()) {
    RefuseHello(session.status());
    return;
  }
  // Nothing is outstanding on the stream until the check answers (on the loop
  // thread, or here at once); it answers whatever becomes of the loop, since
  // EngineCore answers what it never applied.
  {
    absl::MutexLock lock(&mu_);
    check_ = HelloCheck::kWaiting;
  }
  refs_.fetch_add(1);
  const bool asked = worker_->With([&](Worker& worker) {
    worker.CheckDefaultsInLoop(command_.hello(),
                               [this, opened = *std::move(session)](const absl::Status& refused) {
                                 OnHelloChecked(opened, refused);
                                 Unref();
                               });
  });
  if (!asked) OnHelloChecked(nullptr, WorkerGone());
}

void ConnectReactor::OnHelloChecked(const std::shared_ptr<ConnectSession>& opened,
                                    const absl::Status& refused) {
  {
    absl::MutexLock lock(&mu_);
    if (check_ != HelloCheck::kWaiting) return;  // The stream already ended.
    check_ = HelloCheck::kAnswered;
  }
  if (!refused.ok()) {
    RefuseHello(refused);
    return;
  }
  // session_ must be set before the first write can complete.
  session_ = opened;
  if (!worker_->With([this](Worker& worker) { worker.StartSession(session_); })) {
    // Never registered, so nothing else would end it.
    session_->End(WorkerGone());
    session_->Open(std::nullopt);
    return;
  }
  command_.Clear();
  StartRead(&command_);
}

void ConnectReactor::RefuseHello(const absl::Status& status) {
  refusal_ = status;
  const bool described = worker_->With([this](Worker& worker) {
    v1::CommandRejected* rejected = refusal_event_.mutable_rejected();
    rejected->set_seq(command_.seq());
    rejected->set_command(v1::CommandRejected::KIND_HELLO);
    *rejected->mutable_error() = ErrorProto(refusal_, worker.stage_id(), -1, worker.instance_id());
  });
  if (!described) {
    Finish(ToGrpcStatus(refusal_));
    return;
  }
  StartWrite(&refusal_event_);
}

void ConnectReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

}  // namespace omnistage
