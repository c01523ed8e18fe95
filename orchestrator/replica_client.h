// ReplicaClient: the orchestrator's handle on one stage worker replica.
//
// The gRPC implementation (grpc_replica_client.h) owns one Connect session per
// replica; FakeReplicaClient (tests) records calls and is driven by hand. Every
// method is called on the orchestrator's event loop, and every callback and
// ReplicaListener call arrives there too.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICA_CLIENT_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICA_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "protos/common.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class ReplicaClient {
 public:
  virtual ~ReplicaClient() = default;

  // Commands on the session stream, applied by the worker in the order sent. An
  // error means the command was not sent (no session); OnReplicaDown follows.
  virtual absl::Status Add(v1::AddRequest request) = 0;
  virtual absl::Status AppendInput(v1::AppendInput input) = 0;
  // `done` gets the utility's value or its error.
  virtual void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                           std::function<void(absl::StatusOr<google::protobuf::Value>)> done) = 0;
  // One Abort call carrying every id; never overtakes commands sent before it.
  // `done` gets OK once the worker has stopped those requests.
  virtual void Abort(const std::vector<std::string>& ids,
                     std::function<void(absl::Status)> done) = 0;
};

// What a replica reports; called on the event loop.
class ReplicaListener {
 public:
  virtual ~ReplicaListener() = default;
  // The session is up (again): `ready` names the worker's incarnation.
  virtual void OnReplicaReady(int stage, int replica, const v1::Ready& ready) = 0;
  // All outputs of one worker step.
  virtual void OnStepOutputs(int stage, int replica, v1::StepOutputs outputs) = 0;
  // The worker refused a command (e.g. bad parameters for an AddRequest).
  virtual void OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) = 0;
  // The session broke (stream error, worker exit, keepalive timeout, fatal event).
  virtual void OnReplicaDown(int stage, int replica, const absl::Status& reason) = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICA_CLIENT_H_
