// SessionCommands: what a session sends after its Hello (docs/stage_worker.md,
// "The protocol, in short"):
// AddRequest, AppendInput, UtilityCall, DrainAck, PlaybackDeadlines and
// batches of them, each checked, then sequenced into the engine's loop in the
// session's order (ConnectSession::Sequence, so an Abort fenced behind a
// command never overtakes it).
// A command that cannot be applied is answered with CommandRejected, naming
// the request and why; it still counts as applied for the fence. A utility
// call's result goes back to the session that made it, by call id.
//
// Thread-safe: commands arrive on the sessions' stream threads, utility
// results on the engine's loop.
#ifndef OMNISTAGE_STAGE_WORKER_SESSION_COMMANDS_H_
#define OMNISTAGE_STAGE_WORKER_SESSION_COMMANDS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "google/protobuf/struct.pb.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/connect_session.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/request_spans.h"

namespace omnistage {

// OK for an id a session may name a request by; INVALID_ARGUMENT otherwise
// (empty, or longer than kMaxRequestIdBytes).
absl::Status CheckRequestId(const std::string& id);

class SessionCommands {
 public:
  // What the commands need of their worker.
  struct Worker {
    int stage_id = 0;
    std::string instance_id;
    // What every line about the worker carries.
    LogContext log_context;
    const Engine* engine = nullptr;
    // Hands messages to the engine's loop.
    ConnectSession::Submit submit;
    // The step stalled now; 0 when none is (a stalled engine takes no request).
    std::function<uint64_t()> stalled_step;
    // The registered session numbered `number`; null once it closed.
    std::function<std::shared_ptr<ConnectSession>(uint64_t number)> find_session;
    // The requests' spans (request_spans.h); null: none.
    RequestSpans* spans = nullptr;
  };

  explicit SessionCommands(Worker worker);
  SessionCommands(const SessionCommands&) = delete;
  SessionCommands& operator=(const SessionCommands&) = delete;

  // One command of `session`, after its Hello.
  void Handle(ConnectSession& session, v1::WorkerCommand& command);
  // The engine answered utility call `call_id`: the result goes to the
  // session that made the call, if it is still open.
  void UtilityDone(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result);
  // The loop has stopped: the calls in flight are answered by their sessions'
  // end.
  void ForgetUtilities();

 private:
  struct PendingUtility {
    std::shared_ptr<ConnectSession> session;
    uint64_t client_call_id = 0;
  };

  void HandleAdd(ConnectSession& session, v1::WorkerCommand& command);
  // An Add's checks (its id, a stalled step, the engine's Validate), moving its
  // input and parameters into the engine's request; the refusal otherwise.
  absl::StatusOr<EngineRequest> AcceptAdd(const ConnectSession& session, v1::AddRequest& add);
  void HandleAppendInput(ConnectSession& session, v1::WorkerCommand& command);
  void HandleDeadlines(ConnectSession& session, v1::WorkerCommand& command);
  void HandleUtility(ConnectSession& session, v1::WorkerCommand& command);
  void Reject(ConnectSession& session, const v1::WorkerCommand& command,
              const std::string& request_id, const absl::Status& status);
  // Tells `session` that command `seq` (of `command`'s kind) was not applied.
  void SendRejected(ConnectSession& session, uint64_t seq, v1::WorkerCommand::CommandCase command,
                    const std::string& request_id, const absl::Status& status);

  const Worker worker_;
  std::atomic<uint64_t> next_call_id_{1};
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, PendingUtility> utilities_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_SESSION_COMMANDS_H_
