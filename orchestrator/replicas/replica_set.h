// ReplicaSet: the gRPC side of every replica the orchestrator talks to — per
// replica one channel (GrpcWorkerStub) and one ReplicaSession over it — made
// when a replica joins its stage and freed when it leaves.
//
//   ReplicaSet set(&config, &core, &loop);
//   ReplicaClient* client = set.Create(stage, replica, "10.1.2.3:50061");
//   ... the pool learns the replica ...
//   set.Start(stage, replica);      // Hello; Ready reaches `core`
//   set.Destroy(stage, replica);    // it left: session closed, channel shut
//
// Not thread-safe: runs on the orchestrator's event loop, like the sessions.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SET_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SET_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/grpc/tls.h"
#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/replicas/grpc_worker_stub.h"
#include "orchestrator/replicas/replica_session.h"
#include "orchestrator/replicas/stage_membership.h"
#include "orchestrator/routing/replica_client.h"

namespace omnistage {

class ReplicaSet : public ReplicaFactory {
 public:
  // The set for workers reached with `worker_tls` (plaintext when empty):
  // INVALID_ARGUMENT "worker TLS: ..." when its files do not load.
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Create(const PipelineConfig* config,
                                                            ReplicaListener* listener,
                                                            Scheduler* loop,
                                                            const TlsFiles& worker_tls);
  // Not owned; all must outlive the set. `listener` hears every session.
  // `credentials`: for every worker channel (null: plaintext).
  ReplicaSet(const PipelineConfig* config, ReplicaListener* listener, Scheduler* loop,
             std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  ~ReplicaSet() override;

  // ReplicaFactory.
  ReplicaClient* Create(int stage, int replica, const std::string& address) override;
  void Start(int stage, int replica) override;
  void Destroy(int stage, int replica) override;

  // Cancels every stream and waits for gRPC to let go of them (shutdown).
  void ShutdownAll();

 private:
  struct Replica {
    std::unique_ptr<GrpcWorkerStub> stub;
    std::unique_ptr<ReplicaSession> session;
  };

  const PipelineConfig* const config_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  ReplicaListener* const listener_;
  Scheduler* const loop_;
  std::map<std::pair<int, int>, Replica> replicas_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SET_H_
