// ReplicaSession: the orchestrator's session with one stage worker replica, the
// ReplicaClient the StagePool talks to.
//
// It keeps one Connect stream up through a WorkerStub: Hello (with the stage's
// defaults, which the worker checks against its engine), then Ready (-> listener
// OnReplicaReady), then commands with increasing seq; step outputs, rejections and
// stalls go to the listener (a stalled worker that recovers is reported ready
// again), utility results to their callers by call id. When the
// stream ends (error, worker exit, keepalive timeout, fatal event, refused Hello)
// it reports OnReplicaDown and opens a new one after a backoff that doubles from
// reconnect_initial_backoff up to reconnect_max_backoff (reset by a Ready); a
// worker that answers again is a new incarnation with its instance id. Abort is a
// unary call fenced after the last command sent on the session. A command larger
// than the worker accepts (Ready.max_message_bytes) is refused without sending it:
// it would break the whole session.
//
// Threading: everything runs on the event loop (`scheduler`), including the
// stub's callbacks.
#ifndef OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SESSION_H_
#define OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SESSION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/liveness.h"
#include "common/scheduler.h"
#include "orchestrator/replicas/worker_stub.h"
#include "orchestrator/routing/replica_client.h"
#include "protos/common.pb.h"

namespace omnistage {

struct ReplicaSessionOptions {
  int stage = 0;
  int replica = 0;
  // Sent in Hello for the worker to check; none when unset.
  std::optional<v1::StageParameters> defaults;
  // Sets Hello.want_cache_events: the stage picks by prefix from the workers'
  // reports of their caches.
  bool want_cache_events = false;
  absl::Duration reconnect_initial_backoff = absl::Milliseconds(100);
  absl::Duration reconnect_max_backoff = absl::Seconds(5);
  // A utility call with no result by then fails with DEADLINE_EXCEEDED.
  absl::Duration utility_timeout = absl::Seconds(5);
  // The largest message this replica must take for the config's limits (the
  // longest prompt, for stage 0): a worker announcing less is warned about at
  // its Ready, since it would refuse those requests one by one. 0: any.
  int64_t needed_message_bytes = 0;
};

class ReplicaSession : public ReplicaClient {
 public:
  static constexpr uint32_t kProtocolVersion = 1;

  // `stub` and `scheduler` are not owned and must outlive the session.
  ReplicaSession(ReplicaSessionOptions options, WorkerStub* stub, Scheduler* scheduler);
  ~ReplicaSession() override;

  // Where events go; set before Start(), not owned.
  void set_listener(ReplicaListener* listener) { listener_ = listener; }
  // Opens the first session.
  void Start();
  // Ends the session for good (the replica left the pool): the stream is
  // cancelled, pending utility calls fail with `reason`, nothing reconnects and
  // the listener hears nothing more. Then the session may be destroyed.
  void Close(const absl::Status& reason);

  // ReplicaClient.
  absl::Status Add(v1::AddRequest* request) override;
  absl::Status AppendInput(v1::AppendInput input) override;
  absl::Status SetPlaybackDeadlines(v1::PlaybackDeadlines deadlines) override;
  void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                   std::function<void(absl::StatusOr<google::protobuf::Value>)> done) override;
  void Abort(const std::vector<std::string>& ids, absl::Time call_deadline,
             AbortDone done) override;

 private:
  void Connect();
  void OnEvent(uint64_t generation, v1::WorkerEvent& event);
  void OnDone(uint64_t generation, const absl::Status& status);
  // Sends a command on the ready session; see ReplicaClient for the errors.
  absl::Status Send(v1::WorkerCommand& command);
  void FailUtilities(const absl::Status& status);
  absl::Status NotConnected() const;

  const ReplicaSessionOptions options_;
  WorkerStub* const stub_;
  Scheduler* const scheduler_;
  ReplicaListener* listener_ = nullptr;

  // The current stream and what it said; `generation` tells its callbacks from
  // those of earlier streams.
  std::shared_ptr<WorkerStream> stream_;
  uint64_t generation_ = 0;
  bool ready_ = false;
  v1::Ready ready_event_;  // What Ready said; repeated to the listener on a recovery.
  std::string session_id_;
  int64_t max_message_bytes_ = 0;
  uint64_t seq_ = 0;  // Last seq sent on stream_.
  std::string fatal_reason_;
  absl::Status refusal_;  // The worker's CommandRejected for our Hello.

  uint64_t next_call_id_ = 1;
  std::map<uint64_t, std::function<void(absl::StatusOr<google::protobuf::Value>)>> utilities_;
  absl::Duration backoff_;
  Scheduler::TimerId reconnect_timer_ = 0;
  bool closed_ = false;
  // Expires with the session, so late callbacks and timers do nothing.
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_REPLICAS_REPLICA_SESSION_H_
