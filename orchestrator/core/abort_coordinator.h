// AbortCoordinator: every way a request is stopped on the workers, as the
// two-phase abort of docs/architecture.md (StagePool), for many requests at once.
//
// For each request:
//   1. freeze: its outputs are held back (so its partial output stops changing);
//   2. stop it on every stage, stage after stage, one worker Abort per replica per
//      stage for the whole batch; a request whose abort fails on a stage drops out
//      there, keeps its bindings from that stage on and is not committed;
//   3. commit a request that every stage confirmed: it ends with exactly one
//      terminal ABORT carrying its partial output. A request that could not be
//      confirmed resumes (the held outputs are replayed) and can be aborted again.
// Worker calls fail at the client's deadline or after worker_abort_timeout,
// whichever comes first, so an Abort the client gave up on never commits later.
//
// Who asks: the client's Abort (per-id outcomes), a client that went away
// (Cancel: retried with backoff, then ended with an error terminal), a drain
// (AbortAll), and requests that already ended but still run upstream (CleanUp:
// retried, then their bindings are given up).
//
// Owned by PipelineCore, on its event loop. Work is linear in the ids.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_ABORT_COORDINATOR_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_ABORT_COORDINATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/liveness.h"
#include "common/scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/routing/stage_pool.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// What the coordinator asks of the request lifecycle that owns it.
class AbortListener {
 public:
  virtual ~AbortListener() = default;
  // Ends each of `ids` still in flight with the terminal `terminal_for` makes
  // for it (its one terminal response), then stops what they still run and
  // forgets them.
  virtual void EndRequests(
      const std::vector<std::string>& ids,
      const std::function<v1::Terminal(const InFlightRequest&)>& terminal_for) = 0;
  // The last abort holding request `id` failed: the outputs held meanwhile go on.
  virtual void ResumeRequest(const std::string& id) = 0;
};

// The most ids one client Abort call may carry.
inline constexpr int kMaxAbortIdsPerCall = 10000;

// The retries of stops no client waits for. (A worker Abort call fails after
// the config's worker_abort_timeout, or at the client's deadline if sooner.)
struct AbortOptions {
  // A cancelled client's request: this many attempts, the n-th (0-based) retried
  // after cancel_backoff << n; then it ends with an error terminal.
  int cancel_attempts = 5;
  absl::Duration cancel_backoff = absl::Milliseconds(50);
  // An ended request's leftovers: this many attempts per stage, with
  // cleanup_backoff << n between them; then the bindings are given up (the
  // replica's session ending aborts the work worker-side).
  int cleanup_attempts = 4;
  absl::Duration cleanup_backoff = absl::Milliseconds(100);
};

class AbortCoordinator {
 public:
  // None of the pointers is owned; all must outlive the coordinator.
  AbortCoordinator(AbortOptions options, const PipelineConfig* config,
                   const std::vector<std::shared_ptr<StagePool>>* pools, RequestTable* table,
                   Scheduler* scheduler, AbortListener* listener);
  ~AbortCoordinator();

  // The Abort of client `caller`. `done` gets one result per requested id, in
  // order: ABORTED, NOT_FOUND or FAILED (with the stage and replica). Requests
  // another identity started are NOT_FOUND and untouched (their existence is
  // not revealed), unless `caller` may abort any (an admin): each of those is
  // logged with both identities.
  void Abort(const std::vector<std::string>& ids, absl::Time client_deadline,
             std::function<void(v1::AbortResponse)> done, const Caller& caller = Caller());
  // The client of request `id` went away.
  void Cancel(const std::string& id);
  // Aborts every in-flight request; those that cannot be confirmed end with an
  // UNAVAILABLE error saying `why`.
  void AbortAll(const std::string& why);
  // Stops what the (ended) requests `ids` still run on any stage.
  void CleanUp(const std::vector<std::string>& ids);
  // True while a cleanup still holds a binding of `id`.
  bool CleaningUp(const std::string& id) const { return cleaning_.contains(id); }
  // True while a stop of a request named `id` (an Abort's run, a cancel and
  // its retries, a cleanup and its retries) is under way: it finds its request
  // by that name, so a new request must not take the name before it is over.
  bool Stopping(const std::string& id) const {
    return stopping_.contains(id) || cleaning_.contains(id);
  }

 private:
  struct StopRun;
  // An Abort of `ids` that may stop those of them in `stoppable`; `done` gets
  // one result per id of `ids`.
  void AbortStoppable(const std::vector<std::string>& ids,
                      const std::vector<std::string>& stoppable, absl::Time client_deadline,
                      std::function<void(v1::AbortResponse)> done);
  // Phase 1 of ids (deduplicated): returns those now frozen, in order.
  std::vector<std::string> Freeze(const std::vector<std::string>& ids);
  // Phase 2: stops `frozen` on every stage; `done` gets the ones that failed.
  void Stop(std::vector<std::string> frozen, absl::Time call_deadline,
            std::function<void(absl::flat_hash_map<std::string, v1::Error>)> done);
  void StopFrom(std::shared_ptr<StopRun> run);
  // Phase 3 for what stopped (ends them with ABORT), or undoing phase 1 for what
  // failed; returns the committed ids.
  std::vector<std::string> Settle(const std::vector<std::string>& frozen,
                                  const absl::flat_hash_map<std::string, v1::Error>& failed);
  void CancelAttempt(const std::string& id, int attempt);
  // Counts `ids` in stopping_, and back.
  void Hold(const std::vector<std::string>& ids);
  void Unhold(const std::vector<std::string>& ids);
  void CleanUpStage(size_t stage, std::vector<std::string> ids, int attempt);
  absl::Time CallDeadline(absl::Time client_deadline) const;

  const AbortOptions options_;
  const PipelineConfig* const config_;
  const std::vector<std::shared_ptr<StagePool>>* const pools_;
  RequestTable* const table_;
  Scheduler* const scheduler_;
  AbortListener* const listener_;
  // id -> stage cleanups holding one of its bindings.
  absl::flat_hash_map<std::string, int> cleaning_;
  // id -> stops under way that refer to it (see Stopping()).
  absl::flat_hash_map<std::string, int> stopping_;
  // Expires with the coordinator, so late callbacks and timers do nothing.
  Liveness alive_;
};

// The terminal of an aborted request: ABORT, with the output each client-facing
// stage produced so far (text and tokens concatenated; audio is not repeated).
v1::Terminal AbortTerminal(const PipelineConfig& config, const InFlightRequest& request);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_ABORT_COORDINATOR_H_
