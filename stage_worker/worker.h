// Worker: the transport-independent core of a stage worker process.
//
// Owns the engine, the EngineCore busy loop and its thread, and the sessions. gRPC
// reactors (worker_service.h) turn each stream event into one call here; the busy
// loop calls back through CoreSink and the Worker routes step outputs to the
// sessions that own the requests, one event per session per step. It delegates
// to one part per idea:
//   hello.h             what a Hello must be, and the Ready that answers it;
//   SessionCommands     a session's commands after it;
//   CacheReports        an engine's prefix cache, told to the sessions that ask;
//   StallGuard          a step that runs too long.
//
//   Worker worker(options, std::move(engine));
//   worker.Start();
//   ... serve ...
//   worker.RequestShutdown();
//   absl::Status result = worker.Wait();   // OK after shutdown, the fatal error otherwise
#ifndef OMNISTAGE_STAGE_WORKER_WORKER_H_
#define OMNISTAGE_STAGE_WORKER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/revocable.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/cache_reports.h"
#include "stage_worker/connect_session.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/hello.h"
#include "stage_worker/session_commands.h"
#include "stage_worker/stall_guard.h"
#include "stage_worker/step_watchdog.h"
#include "stage_worker/worker_metrics.h"

namespace omnistage {

struct WorkerOptions {
  // The pipeline stage this worker serves.
  int stage_id = 0;
  // The engine's registered name, reported in Ready.
  std::string engine_name;
  // Unique per process start; empty picks one from the time and the process id.
  std::string instance_id;
  // The largest command the server accepts (its receive limit), announced in
  // Ready so that clients never send a larger one.
  int64_t max_message_bytes = kDefaultWorkerMaxMessageBytes;
  // When a step counts as stalled, and when a stalled worker gives up and asks to
  // exit (set_on_stall_exit). Zero: never.
  StallOptions stall;
  // Where the requests' spans go (request_spans.h); null: nowhere.
  std::shared_ptr<const Tracer> tracer;
};

class Worker : public CoreSink {
 public:
  static constexpr uint32_t kProtocolVersion = kWorkerProtocolVersion;
  // The longest the busy loop waits for slow readers after one step.
  static constexpr absl::Duration kMaxReaderWait = absl::Seconds(1);

  Worker(WorkerOptions options, std::unique_ptr<Engine> engine);
  // Revokes revocable() first, then ends the loop (started or not): every
  // session ends with UNAVAILABLE, whatever still serves its stream.
  ~Worker() override;

  // How the streams serving sessions (and anything else that may outlive the
  // worker) reach it: revoked as the worker is destroyed.
  const std::shared_ptr<Revocable<Worker>>& revocable() const { return revocable_; }

  // Starts the busy-loop thread. Once at most.
  void Start();
  // Asks the loop to stop (any thread, non-blocking). Sessions end with
  // UNAVAILABLE once it has.
  void RequestShutdown();
  // A graceful end (SIGTERM): stops serving, tells every session it is draining
  // (clients then send nothing new and acknowledge; what still arrives is
  // served), lets the live requests run until none is left and every session
  // has acknowledged or left, or `timeout` passes; then stops the rest, each
  // ending with a finished ABORT on its session. Blocks; returns how many it
  // stopped. RequestShutdown() comes next.
  int Drain(absl::Duration timeout);
  // Joins the loop thread: OK after a shutdown, the engine's error after a fatal one.
  absl::Status Wait();

  // Called with false when the worker stops serving (fatal error, shutdown, or a
  // stalled step) and with true when a stalled step returns; on the busy-loop or
  // the watchdog thread. Thread-safe; nullptr clears it.
  void set_on_serving(std::function<void(bool serving)> callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Called (on the watchdog thread) when a stalled step has run past
  // options.stall.exit_after; the process should exit non-zero so that its
  // supervisor restarts it. Thread-safe.
  void set_on_stall_exit(std::function<void(const absl::Status& why)> callback)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A client's Hello: checks it and makes a session writing to `transport`
  // (`hello_seq` is the Hello command's seq). Errors: FAILED_PRECONDITION (wrong
  // stage or protocol version), INVALID_ARGUMENT (stage defaults the engine
  // would refuse, with the field path "defaults...."). The session does nothing
  // until StartSession(). `peer`: the client's authenticated identity ("" over
  // plaintext); only it may Abort on the session.
  absl::StatusOr<std::shared_ptr<ConnectSession>> OpenSession(const v1::Hello& hello,
                                                              uint64_t hello_seq,
                                                              EventTransport* transport,
                                                              const std::string& peer = "");
  // Registers `session` and sends it Ready, its first event, or, if the worker
  // has stopped serving, ends it with the reason. Call once the transport can
  // take writes.
  void StartSession(const std::shared_ptr<ConnectSession>& session);
  // For an engine that validates in its loop: checks `hello`'s stage defaults
  // there, then calls `done` (on the loop thread) with OpenSession()'s kind of
  // refusal, or OK; without defaults, or for other engines, calls it at once.
  void CheckDefaultsInLoop(const v1::Hello& hello, std::function<void(const absl::Status&)> done);
  // One command after the Hello (session_commands.h). Bad commands are
  // answered with CommandRejected.
  void HandleCommand(ConnectSession& session, v1::WorkerCommand& command) {
    commands_.Handle(session, command);
  }
  // The session's stream ended or broke: aborts all its requests. Idempotent.
  void CloseSession(ConnectSession& session);
  // The unary Abort. `done` runs once, on the busy-loop thread after the engine
  // applied the abort, or at once for errors (NOT_FOUND: unknown session, or a
  // session `peer` did not open; UNAVAILABLE: the loop has stopped).
  void Abort(const v1::WorkerAbortRequest& request,
             std::function<void(absl::StatusOr<std::vector<std::string>>)> done,
             const std::string& peer = "");

  const std::string& instance_id() const { return options_.instance_id; }
  // What every line about this worker carries: its stage and instance.
  const LogContext& log_context() const { return log_context_; }
  int stage_id() const { return options_.stage_id; }
  const Engine& engine() const { return *engine_; }
  uint64_t steps() const { return core_.steps(); }
  // Live requests over all sessions (for tests and status).
  size_t live_requests() const;
  // The worker's metrics (the registry /metrics serves).
  MetricsRegistry& metrics_registry() { return metrics_registry_; }
  // The step stalled now; 0 when none is.
  uint64_t StalledStep() const { return stall_.stalled_step(); }

  // CoreSink (busy-loop thread only).
  void OnStepBegin(uint64_t step) override { stall_.StepBegan(step); }
  void OnStepEnd(uint64_t step) override { stall_.StepEnded(step); }
  void OnIdle(absl::Duration blocked) override { metrics_.Idle(blocked); }
  void OnStepped(absl::Duration took, size_t outputs, EngineLoad load) override;
  void OnAbortApplied(size_t ids, EngineLoad load) override { metrics_.AbortApplied(ids, load); }
  void OnStepOutputs(uint64_t step, std::vector<v1::RequestOutput> outputs) override;
  void OnUtilityResult(uint64_t call_id, absl::StatusOr<google::protobuf::Value> result) override;
  void OnShutdown() override;
  void OnFatal(const absl::Status& reason) override;

 private:
  std::shared_ptr<ConnectSession> FindSession(uint64_t number) const ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<ConnectSession> FindSessionLocked(uint64_t number) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends every session with `status` (after `last_event`, if given) and marks
  // the worker not serving.
  void StopServing(const absl::Status& status, const v1::WorkerEvent* last_event);
  // Sends `load` (WorkerLoad.requests) as a step event of its own to every
  // session that was last told another value. Busy-loop thread: after a step,
  // and after an abort or a closed session changed the load without one.
  void BroadcastLoad(uint64_t step, int load);
  // The cache report `session` has not had yet, if it asked for them.
  std::optional<v1::CacheEvents> TakeCacheReport(const ConnectSession& session);
  // Tells the server's health, unless the worker has stopped for good.
  void SetServing(bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<ConnectSession>> SessionsLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkerOptions options_;
  const LogContext log_context_;
  MetricsRegistry metrics_registry_;
  WorkerMetrics metrics_{&metrics_registry_};
  const std::unique_ptr<Engine> engine_;
  // The engine's prefix cache (block_tokens 0: none), and what the sessions
  // that asked have not been told of it.
  const PrefixCacheLayout cache_layout_;
  CacheReports cache_reports_;
  EngineCore core_;
  // ConnectSession::Sequence/Fence hand their messages to the loop through this.
  const ConnectSession::Submit submit_;
  std::thread loop_;
  bool started_ = false;  // Owner's thread only.

  mutable absl::Mutex mu_;
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<ConnectSession>> sessions_ ABSL_GUARDED_BY(mu_);
  // Set once the loop has ended; no new sessions after that.
  absl::Status stopped_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  // Set by Drain(): the Draining event new sessions get too.
  std::optional<v1::WorkerEvent> draining_ ABSL_GUARDED_BY(mu_);
  std::function<void(bool)> on_serving_ ABSL_GUARDED_BY(mu_);
  // Each request's span while it runs here.
  RequestSpans spans_;
  // Last but one: its watchdog thread calls into the members above.
  StallGuard stall_;
  SessionCommands commands_;
  const std::shared_ptr<Revocable<Worker>> revocable_ = std::make_shared<Revocable<Worker>>(this);
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_WORKER_H_
