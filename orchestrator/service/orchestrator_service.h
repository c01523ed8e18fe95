// The Orchestrator gRPC service (callback API): thin reactors that hand each
// call to the PipelineCore's event loop (a Generate or an Abort runs on the
// thread that read it when the loop is free: EventLoop::RunOrPost). Generate
// and GenerateDuplex run in their own reactors (generate_reactors.h); an Abort
// goes through the AbortRouter (to the peers holding ids held elsewhere) and
// carries the client's deadline to the workers' abort calls; a cluster status
// asks the peers too. Every call is authenticated first (client_auth.h): a request
// belongs to the caller that started it, and status and utility calls need the
// admin role.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_ORCHESTRATOR_SERVICE_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_ORCHESTRATOR_SERVICE_H_

#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/peers/abort_router.h"
#include "orchestrator/service/client_auth.h"
#include "orchestrator/core/pipeline_core.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class OrchestratorService final : public v1::Orchestrator::CallbackService {
 public:
  // `core`, `router` and `peers` are used only on `loop`; all of them, and
  // `auth`, must outlive the service's calls. `peers` may be null (alone).
  // A cluster status waits for peers `peer_timeout` at most.
  OrchestratorService(PipelineCore* core, EventLoop* loop, const ClientAuth* auth,
                      AbortRouter* router, PeerCalls* peers, absl::Duration peer_timeout)
      : core_(core),
        loop_(loop),
        auth_(auth),
        router_(router),
        peers_(peers),
        peer_timeout_(peer_timeout) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>* GenerateDuplex(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetCaller(grpc::CallbackServerContext* context,
                                      const v1::GetCallerRequest* request,
                                      v1::CallerInfo* response) override;
  grpc::ServerUnaryReactor* GetPipelineStatus(grpc::CallbackServerContext* context,
                                              const v1::PipelineStatusRequest* request,
                                              v1::PipelineStatus* response) override;
  grpc::ServerUnaryReactor* CallStageUtility(grpc::CallbackServerContext* context,
                                             const v1::StageUtilityRequest* request,
                                             v1::StageUtilityResponse* response) override;

 private:
  // The caller of `call`; a refusal is counted.
  absl::StatusOr<Caller> Authenticated(const grpc::CallbackServerContext& context,
                                       absl::string_view call) const;
  // OK when the caller is authenticated and an admin.
  absl::Status Admitted(const grpc::CallbackServerContext& context, absl::string_view call) const;

  PipelineCore* const core_;
  EventLoop* const loop_;
  const ClientAuth* const auth_;
  AbortRouter* const router_;
  PeerCalls* const peers_;
  const absl::Duration peer_timeout_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_ORCHESTRATOR_SERVICE_H_
