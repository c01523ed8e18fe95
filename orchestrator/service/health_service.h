// OrchestratorHealth: grpc.health.v1 for the orchestrator, answered from its
// event loop, as Kubernetes' gRPC probes read it:
//   ""                           liveness: SERVING whenever the event loop answers
//                                (a stuck loop never answers: the probe times out);
//   "omnistage.v1.Orchestrator"  readiness: SERVING while it accepts requests and
//                                every stage has a live replica; NOT_SERVING while
//                                draining or while a stage has none;
//   any other name               NOT_FOUND.
// Watch sends the status, then each change, looked at once a second on the loop.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_HEALTH_SERVICE_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_HEALTH_SERVICE_H_

#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/core/pipeline_core.h"
#include "protos/health.grpc.pb.h"

namespace omnistage {

class OrchestratorHealth final : public grpc::health::v1::Health::CallbackService {
 public:
  static constexpr char kReadinessService[] = "omnistage.v1.Orchestrator";

  // `core` is used only on `loop`; both must outlive the service's calls.
  OrchestratorHealth(PipelineCore* core, EventLoop* loop) : core_(core), loop_(loop) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  PipelineCore* const core_;
  EventLoop* const loop_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_HEALTH_SERVICE_H_
