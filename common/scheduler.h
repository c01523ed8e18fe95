// Scheduler: the clock and timers of one single-threaded owner (an event loop).
//
// Code that owns state on a loop (the orchestrator's PipelineCore, a replica
// session) takes a Scheduler rather than reading the wall clock or sleeping, so
// that its timeouts, deadlines, retries and backoff run against a manual clock in
// unit tests (common/testing/manual_scheduler.h) and against the real EventLoop in the
// binaries.
//
//   TimerId t = scheduler.PostAfter(absl::Seconds(30), [this] { OnIdle(); });
//   ...
//   scheduler.Cancel(t);                 // a no-op if it already ran
//
// Post, PostAt and Cancel are thread-safe; timers and posted tasks run on the
// owner's thread, in deadline order (posting order for equal deadlines).
#ifndef OMNISTAGE_COMMON_SCHEDULER_H_
#define OMNISTAGE_COMMON_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/time/time.h"

namespace omnistage {

class Scheduler {
 public:
  using TimerId = uint64_t;

  virtual ~Scheduler() = default;

  // The scheduler's current time.
  virtual absl::Time Now() const = 0;
  // Runs `task` on the owner's thread, after the tasks posted before it.
  virtual void Post(std::function<void()> task) = 0;
  // Like Post, for bulk work (a worker's outputs): bulk tasks run in the order
  // posted, but a Post()ed task need not wait for the bulk ones queued before
  // it, so control work (a Generate, an Abort, a worker's answer to one) does
  // not queue behind a backlog of outputs. By default the same as Post.
  virtual void PostBulk(std::function<void()> task) { Post(std::move(task)); }
  // Runs `task` on the owner's thread once the task (or timer) running there
  // now has returned, before any bulk task or timer: for work that is cheaper
  // done once per task than once per call (a response's write, started once
  // every output of a worker's event has reached it). A task Post()ed while
  // deferred work runs may run between two deferred tasks (control work does
  // not wait for a whole event's writes); what it defers runs right after it.
  // From another thread, and by default, the same as Post.
  virtual void Defer(std::function<void()> task) { Post(std::move(task)); }
  // Runs `task` at once on the calling thread, as the owner, when nothing runs
  // or waits to run on the owner's thread; else the same as Post (PostBulk).
  // The caller must hold no lock the task might take. For work arriving on
  // transport threads (a client's request, a worker's event): at light load it
  // is then handled where it arrived, without waking the owner's thread. By
  // default the same as Post (PostBulk).
  virtual void RunOrPost(std::function<void()> task) { Post(std::move(task)); }
  virtual void RunOrPostBulk(std::function<void()> task) { PostBulk(std::move(task)); }
  // Runs `task` on the owner's thread at (or soon after) `when`.
  virtual TimerId PostAt(absl::Time when, std::function<void()> task) = 0;
  TimerId PostAfter(absl::Duration delay, std::function<void()> task) {
    return PostAt(Now() + delay, std::move(task));
  }
  // Cancels a timer that has not run; a no-op otherwise (also for id 0).
  virtual void Cancel(TimerId id) = 0;
  // True on the owner's thread.
  virtual bool InLoop() const = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_SCHEDULER_H_
