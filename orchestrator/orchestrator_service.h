// The Orchestrator gRPC service (callback API): thin reactors that post each call
// to the PipelineCore's event loop. A Generate call's responses go through its
// ClientStream (client_stream.h); an Abort carries the client's deadline to the
// workers' abort calls. Every call is authenticated first (client_auth.h): a
// request belongs to the caller that started it, and status and utility calls
// need the admin role.
#ifndef OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
#define OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_

#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/client_auth.h"
#include "orchestrator/pipeline_core.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class OrchestratorService final : public v1::Orchestrator::CallbackService {
 public:
  // `core` is used only on `loop`; both, and `auth`, must outlive the
  // service's calls.
  OrchestratorService(PipelineCore* core, EventLoop* loop, const ClientAuth* auth)
      : core_(core), loop_(loop), auth_(auth) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
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
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_SERVICE_H_
