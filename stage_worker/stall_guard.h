// StallGuard: what a stage worker does about an engine stuck inside a step.
//
// It runs the StepWatchdog over the busy loop's steps. When a step stalls, the
// worker stops serving, every session is told (a Stalled event) and what each
// had live is written off as lost; a session that opens meanwhile hears of it
// too. If the step returns, the lost requests are aborted (each ends with a
// finished ABORT on its session), the sessions hear Recovered and the worker
// serves again. Past the exit timeout the guard asks the process to exit.
//
// Thread-safe: the busy loop reports steps, the watchdog thread reports stalls,
// gRPC threads ask whether a step is stalled.
#ifndef OMNISTAGE_STAGE_WORKER_STALL_GUARD_H_
#define OMNISTAGE_STAGE_WORKER_STALL_GUARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/connect_session.h"
#include "stage_worker/engine_core.h"
#include "stage_worker/request_spans.h"
#include "stage_worker/step_watchdog.h"

namespace omnistage {

class StallGuard {
 public:
  // What the guard needs of its worker.
  struct Hooks {
    // Calls its argument with the sessions open now, while no session can
    // register (one that registers later reads the guard's new state then).
    std::function<void(
        absl::FunctionRef<void(const std::vector<std::shared_ptr<ConnectSession>>&)>)>
        with_sessions;
    // Health follows the stall: false when one begins, true when it ends (the
    // worker ignores true once it has stopped for good).
    std::function<void(bool serving)> set_serving;
    // Queues messages for the busy loop.
    std::function<void(std::vector<CoreMessage>)> submit;
    // The requests' spans (null: none): the lost ones end there.
    RequestSpans* spans = nullptr;
  };

  // Its lines carry `log_context` (the worker's stage and instance).
  StallGuard(StallOptions options, Hooks hooks, LogContext log_context);

  // The busy loop's steps.
  void StepBegan(uint64_t step) { watchdog_.StepBegan(step); }
  void StepEnded(uint64_t step) { watchdog_.StepEnded(step); }

  // The stalled step; 0 when none is.
  uint64_t stalled_step() const;
  // The Stalled event, for a session that opens while a step is stalled. Lock
  // order: the worker's lock may be held (Hooks::with_sessions holds it while
  // the guard's state changes).
  std::optional<v1::WorkerEvent> StalledEvent() const;
  // Called (on the watchdog thread) past options.exit_after; the process should
  // exit non-zero. Thread-safe; nullptr clears it.
  void set_on_exit(std::function<void(const absl::Status& why)> callback);

 private:
  void OnStall(uint64_t step, absl::Duration running);
  void OnRecover(uint64_t step, absl::Duration took);
  void OnExit(uint64_t step, absl::Duration running);

  const StallOptions options_;
  const Hooks hooks_;
  const LogContext log_context_;

  mutable absl::Mutex mu_;
  uint64_t stalled_step_ ABSL_GUARDED_BY(mu_) = 0;
  v1::WorkerEvent stalled_event_ ABSL_GUARDED_BY(mu_);
  // What each session had live when the step stalled.
  std::vector<std::pair<std::shared_ptr<ConnectSession>, std::vector<std::string>>> lost_
      ABSL_GUARDED_BY(mu_);
  std::function<void(const absl::Status&)> on_exit_ ABSL_GUARDED_BY(mu_);
  // Last: its thread calls into the members above.
  StepWatchdog watchdog_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_STALL_GUARD_H_
