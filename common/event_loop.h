// EventLoop: one thread that runs posted closures in order, plus timers; the
// Scheduler of the binaries.
//
// State owned by the loop (the orchestrator's pools and request table) is touched
// only from closures running on it, so it needs no locks. The loop blocks while it
// has nothing to do (until the next timer at most): no polling. The log lines a
// closure writes reach stderr together when it returns (common/log.h, LogBatch).
//
//   EventLoop loop;
//   std::thread thread([&] { loop.Run(); });
//   loop.Post([&] { table.Add(...); });                       // any thread
//   EventLoop::TimerId t = loop.PostAfter(absl::Seconds(1), [&] { ... });
//   loop.Stop();                                               // any thread
//   thread.join();
//
// RunOrPost runs a task on the calling thread instead when nothing runs or waits
// on the loop; that thread owns the loop for the task (InLoop() is true there),
// so tasks still run one at a time and in order.
//
// LoopThread is that thread as a part that owns it: running from construction,
// stopped and joined by destruction.
#ifndef OMNISTAGE_COMMON_EVENT_LOOP_H_
#define OMNISTAGE_COMMON_EVENT_LOOP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/scheduler.h"

namespace omnistage {

class EventLoop : public Scheduler {
 public:
  EventLoop() = default;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs closures and due timers on the calling thread until Stop(). Call once.
  // Once it returns no task runs, here or on a RunOrPost caller's thread.
  void Run();
  // Makes Run() return after the closure it is running (queued ones are dropped).
  void Stop();
  // Hears, for every posted task, how long it waited between Post() and its
  // start (the loop's lag; a metric). Set before Run(); no-op by default.
  void set_lag_observer(std::function<void(absl::Duration)> observer) {
    lag_observer_ = std::move(observer);
  }

  // Scheduler. Tasks run in the order posted, one at a time; InLoop() is true
  // on the thread running one (Run()'s, or a RunOrPost caller's while it runs
  // its task there).
  absl::Time Now() const override { return absl::Now(); }
  void Post(std::function<void()> task) override;
  // Each turn of the loop runs the tasks Post()ed so far, then one bulk task,
  // then the due timers: a Post()ed task waits for at most one bulk task.
  void PostBulk(std::function<void()> task) override;
  TimerId PostAt(absl::Time when, std::function<void()> task) override;
  void Cancel(TimerId id) override;
  bool InLoop() const override { return std::this_thread::get_id() == owner_.load(); }
  void RunOrPost(std::function<void()> task) override;
  void RunOrPostBulk(std::function<void()> task) override;
  // Runs right after the task or timer running now (and after what that one
  // deferred before it), before any bulk task or timer; tasks Post()ed
  // meanwhile run between deferred tasks once no task posted before them
  // waits (Scheduler::Defer).
  void Defer(std::function<void()> task) override;

 private:
  // Run() until stopped.
  void RunTasks();
  // This thread takes the loop, or lets it go.
  void OwnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `task` as the loop's owner: then what it deferred; its log lines go
  // out together.
  void RunTask(std::function<void()>& task);
  // Runs what the task that just ran deferred (and what those defer in turn),
  // swapping it into `running`; with `posted_between`, after each of them the
  // tasks Post()ed meanwhile (RunPostedBetween).
  void RunDeferred(std::vector<std::function<void()>>& running, bool posted_between);
  // On Run()'s thread, once the turn's own tasks all ran, runs the tasks
  // Post()ed since the turn began, each followed by what it deferred (without
  // running others between those); what was deferred before them keeps its
  // place.
  void RunPostedBetween();
  // Runs `task` on this thread if the loop is free, as its owner; false (and
  // `task` untouched) if not.
  bool RunIfFree(std::function<void()>& task);

  absl::Mutex mu_;
  // Each with the time it was posted.
  std::deque<std::pair<absl::Time, std::function<void()>>> tasks_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, std::function<void()>>> bulk_ ABSL_GUARDED_BY(mu_);
  // (deadline, id) -> task; ids keep equal deadlines in posting order.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  std::map<TimerId, absl::Time> timer_deadlines_ ABSL_GUARDED_BY(mu_);
  TimerId next_timer_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // A thread runs tasks (Run()'s, or a RunOrPost caller's); and which.
  bool owned_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<std::thread::id> owner_;
  // Deferred by the task running now; the loop thread's alone.
  std::vector<std::function<void()>> deferred_;
  std::vector<std::function<void()>> running_deferred_;
  // tasks_ is not empty, as last written under mu_ (read without it, a hint).
  std::atomic<bool> posted_waiting_{false};
  // The tasks of the loop's turn that wait behind the one running (Run()'s
  // thread alone).
  size_t batch_waiting_ = 0;
  // The thread in Run(), once it runs.
  std::atomic<std::thread::id> run_thread_;
  std::function<void(absl::Duration)> lag_observer_ = [](absl::Duration) {};
};

// Runs `loop` on a thread of its own until destroyed; the destructor stops the
// loop (tasks still queued are dropped) and joins the thread. `loop` must
// outlive it.
class LoopThread {
 public:
  explicit LoopThread(EventLoop* loop);
  ~LoopThread();
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  // Runs `task` on the loop and returns once it ran. Not from the loop itself.
  void RunAndWait(std::function<void()> task);

 private:
  EventLoop* const loop_;
  std::thread thread_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_EVENT_LOOP_H_
