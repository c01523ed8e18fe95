#include "stage_worker/step_watchdog.h"

#include <utility>

#include "absl/time/clock.h"

namespace omnistage {

void StallTracker::StepBegan(uint64_t step, absl::Time now) {
  stepping_ = true;
  step_ = step;
  began_ = now;
  stalled_ = false;
  exited_ = false;
}

bool StallTracker::StepEnded(uint64_t step) {
  const bool recovered = stepping_ && step == step_ && stalled_;
  stepping_ = false;
  stalled_ = false;
  return recovered;
}

StallTracker::Due StallTracker::Check(absl::Time now) {
  if (!stepping_ || options_.stall_after <= absl::ZeroDuration()) return Due::kNothing;
  const absl::Duration running = now - began_;
  if (!stalled_) {
    if (running < options_.stall_after) return Due::kNothing;
    stalled_ = true;
    return Due::kStall;
  }
  if (options_.exit_after > absl::ZeroDuration() && !exited_ && running >= options_.exit_after) {
    exited_ = true;
    return Due::kExit;
  }
  return Due::kNothing;
}

absl::Time StallTracker::NextDue() const {
  if (!stepping_ || options_.stall_after <= absl::ZeroDuration()) return absl::InfiniteFuture();
  if (!stalled_) return began_ + options_.stall_after;
  if (options_.exit_after > absl::ZeroDuration() && !exited_) return began_ + options_.exit_after;
  return absl::InfiniteFuture();
}

StepWatchdog::StepWatchdog(StallOptions options, Callbacks callbacks)
    : enabled_(options.stall_after > absl::ZeroDuration()),
      callbacks_(std::move(callbacks)),
      tracker_(options) {
  if (enabled_) thread_ = std::thread([this] { Run(); });
}

StepWatchdog::~StepWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StepWatchdog::StepBegan(uint64_t step) {
  if (!enabled_) return;
  absl::MutexLock lock(&mu_);
  tracker_.StepBegan(step, absl::Now());
}

void StepWatchdog::StepEnded(uint64_t step) {
  if (!enabled_) return;
  bool recovered;
  absl::Time began;
  {
    absl::MutexLock lock(&mu_);
    began = tracker_.began();
    recovered = tracker_.StepEnded(step);
  }
  if (recovered) callbacks_.on_recover(step, absl::Now() - began);
}

void StepWatchdog::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    const absl::Time due = tracker_.NextDue();
    if (due == absl::InfiniteFuture()) {
      // Idle, or stalled with nothing more to do: wait for the next step to begin
      // or the stalled one to end. (Back-to-back steps do not wake this thread.)
      const uint64_t step = tracker_.step();
      const bool stepping = tracker_.stepping();
      auto changed = [this, step, stepping]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || tracker_.step() != step || tracker_.stepping() != stepping;
      };
      mu_.Await(absl::Condition(&changed));
      continue;
    }
    mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
    if (stop_) return;
    const uint64_t step = tracker_.step();
    const absl::Duration running = absl::Now() - tracker_.began();
    const StallTracker::Due what = tracker_.Check(absl::Now());
    if (what == StallTracker::Due::kNothing) continue;
    mu_.Unlock();
    if (what == StallTracker::Due::kStall) callbacks_.on_stall(step, running);
    if (what == StallTracker::Due::kExit) callbacks_.on_exit(step, running);
    mu_.Lock();
  }
}

}  // namespace omnistage
