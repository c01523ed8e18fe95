// Watching the engine's steps for stalls (a step that does not return).
//
// StallTracker is the rule, a plain object with the time passed in: a step that
// runs past `stall_after` is stalled (reported once); if it runs past
// `exit_after` (when set) the process should exit so its supervisor restarts it;
// a stalled step that returns after all is a recovery.
//
// StepWatchdog runs a StallTracker on its own thread against the real clock. It
// wakes only at deadlines and when a step starts after an idle spell, so an idle
// worker costs nothing and a busy one one wake-up per stall_after. The busy loop
// tells it when steps begin and end (StepBegan/StepEnded, loop thread); the
// callbacks run on the watchdog's thread (stall, exit) and on the loop thread
// (recovery, from StepEnded).
//
//   StallOptions options;
//   options.stall_after = absl::Seconds(30);
//   StepWatchdog watchdog(options, callbacks);
//   watchdog.StepBegan(step);  ...  watchdog.StepEnded(step);
#ifndef OMNISTAGE_STAGE_WORKER_STEP_WATCHDOG_H_
#define OMNISTAGE_STAGE_WORKER_STEP_WATCHDOG_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace omnistage {

struct StallOptions {
  // A step running longer than this is stalled; zero: never.
  absl::Duration stall_after = absl::ZeroDuration();
  // A step running longer than this makes the process exit; zero: never. Counted
  // from the step's start, so it should exceed stall_after.
  absl::Duration exit_after = absl::ZeroDuration();
};

class StallTracker {
 public:
  enum class Due { kNothing, kStall, kExit };

  explicit StallTracker(StallOptions options) : options_(options) {}

  void StepBegan(uint64_t step, absl::Time now);
  // True when the step that ended had been reported stalled (a recovery).
  bool StepEnded(uint64_t step);
  // What is due at `now`. kStall is reported once per stalled step, kExit once.
  Due Check(absl::Time now);
  // When Check() next may report something; InfiniteFuture when nothing can be
  // due until a step begins or ends.
  absl::Time NextDue() const;

  bool stepping() const { return stepping_; }
  uint64_t step() const { return step_; }
  absl::Time began() const { return began_; }

 private:
  const StallOptions options_;
  bool stepping_ = false;
  uint64_t step_ = 0;
  absl::Time began_;
  bool stalled_ = false;
  bool exited_ = false;
};

class StepWatchdog {
 public:
  struct Callbacks {
    // Step `step` has been running for `running` (watchdog thread).
    std::function<void(uint64_t step, absl::Duration running)> on_stall;
    // Step `step` ran past exit_after (watchdog thread).
    std::function<void(uint64_t step, absl::Duration running)> on_exit;
    // The stalled step `step` returned after `took` (loop thread).
    std::function<void(uint64_t step, absl::Duration took)> on_recover;
  };

  // Starts the thread when options.stall_after is set.
  StepWatchdog(StallOptions options, Callbacks callbacks);
  ~StepWatchdog();
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // The busy loop's thread.
  void StepBegan(uint64_t step);
  void StepEnded(uint64_t step);

 private:
  void Run();

  const bool enabled_;
  const Callbacks callbacks_;
  absl::Mutex mu_;
  StallTracker tracker_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once everything above exists.
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_STEP_WATCHDOG_H_
