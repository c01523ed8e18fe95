#include "orchestrator/peers/peer_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc/unary_finish.h"
#include "common/log.h"

namespace omnistage {

grpc::ServerUnaryReactor* PeerService::PeerAbort(grpc::CallbackServerContext* context,
                                                 const v1::PeerAbortRequest* request,
                                                 v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline = DeadlineOf(*context);
  loop_->Post([core = core_, request, response, reactor, deadline] {
    v1::AbortRequest abort;
    *abort.mutable_request_ids() = request->request_ids();
    Log(LogLevel::kDebug, LogContext{},
        absl::StrCat("abort of ", abort.request_ids_size(), " id(s) forwarded by node ",
                     request->from_node()));
    core->Abort(abort, deadline, FinishWith(reactor, response),
                Caller::Of(request->caller(), false, request->caller_aborts_any()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* PeerService::PeerStatus(grpc::CallbackServerContext* context,
                                                  const v1::PeerStatusRequest* /*request*/,
                                                  v1::PeerStatusResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, response, reactor] {
    response->set_node_id(core->node_id());
    *response->mutable_status() = core->Status();
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

}  // namespace omnistage
