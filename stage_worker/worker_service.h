// The StageWorker gRPC service over a Worker (callback API), and the server that
// hosts it with grpc.health.v1 and server reflection.
//
//   WorkerServerOptions options;
//   options.address = "127.0.0.1:0";
//   auto server = WorkerServer::Start(options, &worker);
//   std::cout << (*server)->port();
//   ...
//   (*server)->Shutdown(absl::Seconds(2));
#ifndef OMNISTAGE_STAGE_WORKER_WORKER_SERVICE_H_
#define OMNISTAGE_STAGE_WORKER_WORKER_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/grpc/grpc_util.h"
#include "common/limits.h"
#include "common/revocable.h"
#include "grpcpp/grpcpp.h"
#include "protos/stage_worker.grpc.pb.h"
#include "stage_worker/worker.h"

namespace omnistage {

// Thin reactors: each stream event becomes one call on the Worker. The
// service and its streams may outlive the Worker: once it is destroyed, what
// still arrives is answered UNAVAILABLE, and every stream ends.
class StageWorkerService final : public v1::StageWorker::CallbackService {
 public:
  // `require_tls`: calls that did not come over TLS (the plaintext health
  // port) are refused.
  StageWorkerService(Worker* worker, bool require_tls);

  grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* Connect(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::WorkerAbortRequest* request,
                                  v1::WorkerAbortResponse* response) override;

 private:
  const std::shared_ptr<Revocable<Worker>> worker_;
  const bool require_tls_;
};

struct WorkerServerOptions {
  // host:port; port 0 picks a free port.
  std::string address = "127.0.0.1:0";
  // Largest message accepted from a client; larger ones fail with RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = static_cast<int>(kDefaultWorkerMaxMessageBytes);
  // TLS; with tls.ca, only clients whose certificate chains to it may connect
  // (mTLS). Plaintext when empty.
  TlsFiles tls;
  // How `tls` was given, named in its errors (common/grpc/grpc_util.h).
  std::string tls_flags;
  // Concurrent streams one connection may open, and the shortest interval
  // between a client's keepalive pings (common/grpc/grpc_util.h). The
  // orchestrator's keepalive_ms is at least 100 ms.
  int max_streams_per_connection = 1000;
  absl::Duration min_ping_interval = absl::Milliseconds(50);
  // host:port of a plaintext port answering only health checks (probes that
  // cannot speak TLS); empty: none.
  std::string health_address;
};

class WorkerServer {
 public:
  // Health: "" is liveness (SERVING while the server runs); this name is
  // readiness (NOT_SERVING once the worker stops, drains or stalls).
  static constexpr char kReadinessService[] = "omnistage.v1.StageWorker";

  // Builds and starts the server (health SERVING) and follows the worker's serving
  // state (NOT_SERVING once it stops, and while a step is stalled). The server
  // and the worker may be destroyed in either order (docs/stage_worker.md,
  // "Shutdown").
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Start(const WorkerServerOptions& options,
                                                             Worker* worker);
  ~WorkerServer();

  int port() const { return port_; }
  // The plaintext health port; 0 when there is none.
  int health_port() const { return health_port_; }
  void SetServing(bool serving);
  // Stops accepting calls; cancels those still running after `grace`, and
  // returns once every call has ended.
  void Shutdown(absl::Duration grace);

 private:
  WorkerServer(Worker* worker, bool require_tls)
      : service_(worker, require_tls),
        serving_(std::make_shared<Revocable<WorkerServer>>(this)) {}

  StageWorkerService service_;
  // How the worker's serving changes reach this server, until Shutdown().
  const std::shared_ptr<Revocable<WorkerServer>> serving_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int health_port_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_WORKER_SERVICE_H_
