#include "stage_worker/worker_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"

namespace omnistage {
namespace {

// One Connect stream. Before the Hello it answers alone (a refused Hello gets a
// CommandRejected, then the stream ends with the error); after it, writes and
// the stream's end are driven by the Session.
class ConnectReactor final : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>,
                             public EventTransport {
 public:
  ConnectReactor(Worker* worker, grpc::CallbackServerContext* context)
      : worker_(worker), context_(context) {
    StartRead(&command_);
  }

  void OnReadDone(bool ok) override {
    if (session_ == nullptr) {
      OnFirstCommand(ok);
      return;
    }
    if (!ok) {
      // The client closed its side or the stream broke: no orphan work.
      worker_->CloseSession(*session_);
      session_->End(absl::OkStatus());
      return;
    }
    worker_->HandleCommand(*session_, command_);
    command_.Clear();
    StartRead(&command_);
  }

  void OnWriteDone(bool ok) override {
    if (session_ == nullptr) {
      Finish(ToGrpcStatus(refusal_));  // The refusal of the Hello is written.
      return;
    }
    session_->OnWriteDone(ok);
  }

  void OnDone() override { delete this; }

  // EventTransport.
  void BeginWrite(const v1::WorkerEvent* event) override { StartWrite(event); }
  void FinishStream(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }
  void CancelStream() override { context_->TryCancel(); }

 private:
  void OnFirstCommand(bool ok) {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    if (!command_.has_hello()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first command of a session must be hello"));
      return;
    }
    absl::StatusOr<std::shared_ptr<Session>> session =
        worker_->OpenSession(command_.hello(), command_.seq(), this, PeerIdentity(*context_));
    if (!session.ok()) {
      RefuseHello(session.status());
      return;
    }
    // Nothing is outstanding on the stream until the check answers, so the
    // reactor waits for it (on the loop thread, or here at once).
    worker_->CheckDefaultsInLoop(
        command_.hello(), [this, opened = *std::move(session)](const absl::Status& refused) {
          if (!refused.ok()) {
            RefuseHello(refused);
            return;
          }
          // session_ must be set before the first write can complete.
          session_ = opened;
          worker_->StartSession(session_);
          command_.Clear();
          StartRead(&command_);
        });
  }

  // Says which field was refused, then ends the stream with the same error.
  void RefuseHello(const absl::Status& status) {
    refusal_ = status;
    v1::CommandRejected* rejected = refusal_event_.mutable_rejected();
    rejected->set_seq(command_.seq());
    rejected->set_command(v1::CommandRejected::KIND_HELLO);
    *rejected->mutable_error() =
        ErrorProto(refusal_, worker_->stage_id(), -1, worker_->instance_id());
    StartWrite(&refusal_event_);
  }

  Worker* const worker_;
  grpc::CallbackServerContext* const context_;
  v1::WorkerCommand command_;
  // Set once, on the first read; reads are sequential, so no lock is needed.
  std::shared_ptr<Session> session_;
  // A refused Hello: the event saying so, and the stream's final status.
  v1::WorkerEvent refusal_event_;
  absl::Status refusal_;
};

// A Connect refused before it started (it did not come over TLS).
class RefusedConnect final : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent> {
 public:
  explicit RefusedConnect(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* StageWorkerService::Connect(
    grpc::CallbackServerContext* context) {
  if (require_tls_ && !ArrivedOverTls(*context)) return new RefusedConnect(PlaintextRefused());
  return new ConnectReactor(worker_, context);
}

grpc::ServerUnaryReactor* StageWorkerService::Abort(grpc::CallbackServerContext* context,
                                                    const v1::WorkerAbortRequest* request,
                                                    v1::WorkerAbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (require_tls_ && !ArrivedOverTls(*context)) {
    reactor->Finish(ToGrpcStatus(PlaintextRefused()));
    return reactor;
  }
  worker_->Abort(
      *request,
      [reactor, response](absl::StatusOr<std::vector<std::string>> aborted) {
        if (!aborted.ok()) {
          reactor->Finish(ToGrpcStatus(aborted.status()));
          return;
        }
        for (std::string& id : *aborted) response->add_aborted_ids(std::move(id));
        reactor->Finish(grpc::Status::OK);
      },
      PeerIdentity(*context));
  return reactor;
}

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Start(
    const WorkerServerOptions& options, Worker* worker) {
  std::unique_ptr<WorkerServer> server(new WorkerServer(worker, options.tls.enabled()));
  GrpcServerOptions grpc_options;
  grpc_options.address = options.address;
  grpc_options.max_receive_message_bytes = options.max_receive_message_bytes;
  grpc_options.readiness_service = kReadinessService;
  grpc_options.tls = options.tls;
  grpc_options.name = "the stage worker";
  grpc_options.max_streams_per_connection = options.max_streams_per_connection;
  grpc_options.min_ping_interval = options.min_ping_interval;
  grpc_options.plaintext_health_address = options.health_address;
  grpc_options.tls_flags = options.tls_flags;
  absl::StatusOr<StartedServer> started = StartGrpcServer(grpc_options, {&server->service_});
  if (!started.ok()) return started.status();
  server->server_ = std::move(started->server);
  server->port_ = started->port;
  server->health_port_ = started->health_port;
  WorkerServer* raw = server.get();
  worker->set_on_serving([raw](bool serving) { raw->SetServing(serving); });
  return server;
}

WorkerServer::~WorkerServer() {
  worker_->set_on_serving(nullptr);
  Shutdown(absl::ZeroDuration());
}

void WorkerServer::SetServing(bool serving) {
  SetReady(server_.get(), kReadinessService, serving);
}

void WorkerServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_.reset();
}

}  // namespace omnistage
