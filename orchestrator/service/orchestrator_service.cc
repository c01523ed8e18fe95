#include "orchestrator/service/orchestrator_service.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/unary_finish.h"
#include "orchestrator/peers/cluster_status.h"
#include "orchestrator/service/generate_reactors.h"

namespace omnistage {
absl::StatusOr<Caller> OrchestratorService::Authenticated(
    const grpc::CallbackServerContext& context, absl::string_view call) const {
  absl::StatusOr<Caller> caller = auth_->Authenticate(context);
  if (!caller.ok()) core_->metrics().AuthRefused(call, caller.status().code());
  return caller;
}

absl::Status OrchestratorService::Admitted(const grpc::CallbackServerContext& context,
                                           absl::string_view call) const {
  absl::StatusOr<Caller> caller = Authenticated(context, call);
  if (!caller.ok()) return caller.status();
  absl::Status allowed = ClientAuth::RequireAdmin(*caller, call);
  if (!allowed.ok()) core_->metrics().AuthRefused(call, allowed.code());
  return allowed;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* OrchestratorService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  absl::StatusOr<Caller> caller = Authenticated(*context, "Generate");
  if (caller.ok() && !request->on_behalf_of().empty()) {
    caller = auth_->OnBehalfOf(*caller, request->on_behalf_of());
    if (!caller.ok()) core_->metrics().AuthRefused("Generate", caller.status().code());
  }
  if (!caller.ok()) return RefusedGenerate(caller.status());
  return NewGenerateReactor(context, core_, loop_, *request, *std::move(caller));
}

grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>*
OrchestratorService::GenerateDuplex(grpc::CallbackServerContext* context) {
  absl::StatusOr<Caller> caller = Authenticated(*context, "GenerateDuplex");
  if (!caller.ok()) return RefusedDuplex(caller.status());
  return NewDuplexReactor(context, core_, loop_, *std::move(caller));
}

grpc::ServerUnaryReactor* OrchestratorService::Abort(grpc::CallbackServerContext* context,
                                                     const v1::AbortRequest* request,
                                                     v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Authenticated(*context, "Abort");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  const absl::Time client_deadline = DeadlineOf(*context);
  // When the loop is free, this thread runs the Abort: no hand-off to the
  // loop's thread, which would first have to wake.
  loop_->RunOrPost(
      [router = router_, request, response, reactor, client_deadline,
       caller = *std::move(caller)] {
        router->Abort(*request, client_deadline, FinishWith(reactor, response), caller);
      });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::GetCaller(grpc::CallbackServerContext* context,
                                                         const v1::GetCallerRequest*,
                                                         v1::CallerInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Authenticated(*context, "GetCaller");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  response->set_identity(caller->identity);
  response->set_admin(caller->admin);
  response->set_priority(caller->priority);
  response->set_max_priority(caller->max_priority);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::GetPipelineStatus(
    grpc::CallbackServerContext* context, const v1::PipelineStatusRequest* request,
    v1::PipelineStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = Admitted(*context, "GetPipelineStatus"); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  const absl::Time call_deadline = std::min(DeadlineOf(*context), absl::Now() + peer_timeout_);
  loop_->Post([core = core_, peers = peers_, cluster = request->cluster(), response, reactor,
               call_deadline] {
    if (!cluster) {
      *response = core->Status();
      reactor->Finish(grpc::Status::OK);
      return;
    }
    AskCluster(core->Status(), peers, call_deadline, [response, reactor](v1::PipelineStatus status) {
      *response = std::move(status);
      reactor->Finish(grpc::Status::OK);
    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::CallStageUtility(
    grpc::CallbackServerContext* context, const v1::StageUtilityRequest* request,
    v1::StageUtilityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = Admitted(*context, "CallStageUtility"); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  loop_->Post([core = core_, request, response, reactor] {
    core->CallStageUtility(*request, FinishWith(reactor, response));
  });
  return reactor;
}

}  // namespace omnistage
