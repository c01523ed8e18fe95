// PeerService: the OrchestratorPeer service (protos/orchestrator_peer.proto) on
// the orchestrator's peer port: a peer's forwarded Abort, aborted here as the
// client's own would be and never forwarded further, and this orchestrator's
// node id and status. Who may call is settled by the port's transport (mutual
// TLS with --peer_tls_*); each call is posted to the PipelineCore's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SERVICE_H_
#define OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SERVICE_H_

#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/core/pipeline_core.h"
#include "protos/orchestrator_peer.grpc.pb.h"

namespace omnistage {

class PeerService final : public v1::OrchestratorPeer::CallbackService {
 public:
  // `core` is used only on `loop`; both must outlive the service's calls.
  PeerService(PipelineCore* core, EventLoop* loop) : core_(core), loop_(loop) {}

  grpc::ServerUnaryReactor* PeerAbort(grpc::CallbackServerContext* context,
                                      const v1::PeerAbortRequest* request,
                                      v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* PeerStatus(grpc::CallbackServerContext* context,
                                       const v1::PeerStatusRequest* request,
                                       v1::PeerStatusResponse* response) override;

 private:
  PipelineCore* const core_;
  EventLoop* const loop_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SERVICE_H_
