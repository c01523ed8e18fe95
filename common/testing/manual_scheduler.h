// ManualScheduler: a Scheduler whose clock moves only when a test says so.
//
// Posted tasks and due timers run on the test's thread inside RunPending() and
// AdvanceBy(), in deadline order (posting order for equal deadlines), so timeouts,
// retries and backoff are tested without sleeping.
//
//   ManualScheduler scheduler;
//   PipelineCore core(config, replicas, &scheduler);
//   scheduler.AdvanceBy(absl::Seconds(30));   // the idle timer fires here
//
// InLoop() is true on the thread that made the scheduler. Not thread-safe.
#ifndef OMNISTAGE_COMMON_TESTING_MANUAL_SCHEDULER_H_
#define OMNISTAGE_COMMON_TESTING_MANUAL_SCHEDULER_H_

#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/time/time.h"
#include "common/scheduler.h"

namespace omnistage {

class ManualScheduler : public Scheduler {
 public:
  // The clock starts at an arbitrary fixed time.
  ManualScheduler() = default;

  absl::Time Now() const override { return now_; }
  void Post(std::function<void()> task) override { PostAt(now_, std::move(task)); }
  TimerId PostAt(absl::Time when, std::function<void()> task) override;
  void Cancel(TimerId id) override;
  bool InLoop() const override { return std::this_thread::get_id() == owner_; }

  // Runs what is due now (also what those tasks post for now); returns how many ran.
  int RunPending();
  // Moves the clock forward by `delay`, running each timer at its deadline.
  void AdvanceBy(absl::Duration delay);
  // Timers and tasks not yet run.
  size_t pending() const { return tasks_.size(); }
  // The deadline of the earliest pending timer (InfiniteFuture when none).
  absl::Time next_deadline() const;

 private:
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  const std::thread::id owner_ = std::this_thread::get_id();
  TimerId next_id_ = 1;
  // (deadline, id) -> task.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> tasks_;
  std::map<TimerId, absl::Time> deadlines_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TESTING_MANUAL_SCHEDULER_H_
