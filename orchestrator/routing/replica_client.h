// ReplicaClient: the orchestrator's handle on one stage worker replica.
//
// The real implementation (replica_session.h) keeps one Connect session per
// replica over a WorkerStub; FakeReplicaClient (tests) records calls and is driven
// by hand. Only the replica's StagePool calls it. Every method is called on the
// orchestrator's event loop, and every callback and ReplicaListener call arrives
// there too.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_CLIENT_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "protos/common.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class ReplicaClient {
 public:
  virtual ~ReplicaClient() = default;

  // Commands on the session stream, applied by the worker in the order sent. An
  // error means the command was not sent:
  //   UNAVAILABLE         the replica has no session (it is down or going down);
  //   RESOURCE_EXHAUSTED  the command is larger than the replica accepts
  //                       (Ready.max_message_bytes); the replica is fine.
  // Add moves from `*request` only when it succeeds, so a refused request can be
  // sent elsewhere.
  virtual absl::Status Add(v1::AddRequest* request) = 0;
  virtual absl::Status AppendInput(v1::AppendInput input) = 0;
  // Only to a replica whose Ready.playback_deadlines is set.
  virtual absl::Status SetPlaybackDeadlines(v1::PlaybackDeadlines deadlines) = 0;
  // `done` gets the utility's value or its error.
  virtual void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                           std::function<void(absl::StatusOr<google::protobuf::Value>)> done) = 0;
  // One Abort call carrying every id; never overtakes commands sent before it.
  // `done` gets, once the worker has stopped those requests, the ids it found
  // live and stopped (the others had ended there before the abort arrived),
  // or an error (DEADLINE_EXCEEDED once `call_deadline` passes).
  using AbortDone = std::function<void(absl::StatusOr<std::vector<std::string>> stopped)>;
  virtual void Abort(const std::vector<std::string>& ids, absl::Time call_deadline,
                     AbortDone done) = 0;
};

// What a replica reports; called on the event loop.
class ReplicaListener {
 public:
  virtual ~ReplicaListener() = default;
  // The session is up (again): `ready` names the worker's incarnation.
  virtual void OnReplicaReady(int stage, int replica, const v1::Ready& ready) = 0;
  // All outputs of one worker event (one or more steps, merged by the worker).
  // The listener may move from `outputs` (which may live on an arena).
  virtual void OnStepOutputs(int stage, int replica, v1::StepOutputs& outputs) = 0;
  // The worker refused a command (e.g. bad parameters for an AddRequest).
  virtual void OnCommandRejected(int stage, int replica, const v1::CommandRejected& rejected) = 0;
  // The worker's engine is stuck in one step: its live requests are lost and it
  // takes no new ones. If the step returns, OnReplicaReady follows with the same
  // incarnation.
  virtual void OnReplicaStalled(int stage, int replica, const v1::Stalled& stalled) = 0;
  // The worker is shutting down gracefully: it finishes the requests it has and
  // should be sent no new ones. Its session ends when it is done.
  virtual void OnReplicaDraining(int stage, int replica, const v1::Draining& draining) = 0;
  // The session broke (stream error, worker exit, keepalive timeout, fatal
  // event) or was refused at its Hello (`reason` then carries the worker's
  // error, with the field it refused).
  virtual void OnReplicaDown(int stage, int replica, const absl::Status& reason) = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_CLIENT_H_
