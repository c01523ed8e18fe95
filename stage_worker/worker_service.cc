#include "stage_worker/worker_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/deferred_unary_reactor.h"
#include "common/grpc/grpc_util.h"
#include "stage_worker/connect_reactor.h"

namespace omnistage {
namespace {

// A Connect refused before it started (it did not come over TLS).
class RefusedConnect final : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent> {
 public:
  explicit RefusedConnect(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

StageWorkerService::StageWorkerService(Worker* worker, bool require_tls)
    : worker_(worker->revocable()), require_tls_(require_tls) {}

grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* StageWorkerService::Connect(
    grpc::CallbackServerContext* context) {
  if (require_tls_ && !ArrivedOverTls(*context)) return new RefusedConnect(PlaintextRefused());
  return new ConnectReactor(worker_, context);
}

grpc::ServerUnaryReactor* StageWorkerService::Abort(grpc::CallbackServerContext* context,
                                                    const v1::WorkerAbortRequest* request,
                                                    v1::WorkerAbortResponse* response) {
  if (require_tls_ && !ArrivedOverTls(*context)) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(PlaintextRefused()));
    return reactor;
  }
  // Answered on the busy loop once the engine applied the abort; a call
  // cancelled before that (the server shutting down) ends at once.
  auto* reactor = new DeferredUnaryReactor();
  auto done = [reactor, response](absl::StatusOr<std::vector<std::string>> aborted) {
    reactor->Answer([&] {
      if (!aborted.ok()) return ToGrpcStatus(aborted.status());
      for (std::string& id : *aborted) response->add_aborted_ids(std::move(id));
      return grpc::Status::OK;
    });
  };
  if (!worker_->With([&](Worker& worker) {
        worker.Abort(*request, std::move(done), PeerIdentity(*context));
      })) {
    done(ConnectReactor::WorkerGone());
  }
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
  // The worker may outlive the server, or be destroyed first: the callback
  // reaches the server only until Shutdown().
  worker->set_on_serving([serving = server->serving_](bool ready) {
    serving->With([ready](WorkerServer& server) { server.SetServing(ready); });
  });
  return server;
}

WorkerServer::~WorkerServer() { Shutdown(absl::ZeroDuration()); }

void WorkerServer::SetServing(bool serving) {
  SetReady(server_.get(), kReadinessService, serving);
}

void WorkerServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  // The worker's changes of serving reach this server no more (its callback
  // may run on another thread right now: this waits for it).
  serving_->Revoke();
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_.reset();
}

}  // namespace omnistage
