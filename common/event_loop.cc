#include "common/event_loop.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "common/log.h"

namespace omnistage {

void EventLoop::RunTasks() {
  run_thread_.store(std::this_thread::get_id());
  std::deque<std::pair<absl::Time, std::function<void()>>> batch;
  std::vector<std::pair<absl::Time, TimerId>> due;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopped_) return;
        const absl::Time now = absl::Now();
        const bool timer_due = !timers_.empty() && timers_.begin()->first.first <= now;
        if (!owned_ && (!tasks_.empty() || !bulk_.empty() || timer_due)) break;
        if (owned_) {
          // A RunOrPost caller runs its task here: wait until it is done.
          auto released = [this]()
                              ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_ || !owned_; };
          mu_.Await(absl::Condition(&released));
          continue;
        }
        // Sleep until a task, Stop(), the earliest timer, or a timer earlier
        // than that one being posted. While a RunOrPost caller owns the loop,
        // what is posted meanwhile wakes this thread only once it is done.
        const absl::Time wake_at =
            timers_.empty() ? absl::InfiniteFuture() : timers_.begin()->first.first;
        auto has_work = [this, wake_at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopped_ ||
                 (!owned_ && (!tasks_.empty() || !bulk_.empty() ||
                              (!timers_.empty() && timers_.begin()->first.first < wake_at)));
        };
        mu_.AwaitWithDeadline(absl::Condition(&has_work), wake_at);
      }
      OwnLocked();
      batch.swap(tasks_);
      posted_waiting_.store(false, std::memory_order_relaxed);
      // One bulk task per turn, after the others: each kind keeps moving.
      if (!bulk_.empty()) {
        batch.push_back(std::move(bulk_.front()));
        bulk_.pop_front();
      }
      // Due timers run after the tasks already queued. They stay in timers_ until
      // they run, so that a task or timer ahead of them can still Cancel() them
      // (a request finishing just as its deadline passes).
      const absl::Time now = absl::Now();
      for (auto it = timers_.begin(); it != timers_.end() && it->first.first <= now; ++it) {
        due.push_back(it->first);
      }
    }
    bool stopped = false;
    while (!batch.empty() && !stopped) {
      auto [posted, task] = std::move(batch.front());
      batch.pop_front();
      batch_waiting_ = batch.size();
      lag_observer_(absl::Now() - posted);
      RunTask(task);
      absl::MutexLock lock(&mu_);
      stopped = stopped_;
    }
    batch.clear();
    batch_waiting_ = 0;
    for (const std::pair<absl::Time, TimerId>& key : due) {
      if (stopped) break;
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        if (stopped_) break;
        auto it = timers_.find(key);
        if (it == timers_.end()) continue;  // Cancelled since it fell due.
        task = std::move(it->second);
        timers_.erase(it);
        timer_deadlines_.erase(key.second);
      }
      RunTask(task);
    }
    due.clear();
    absl::MutexLock lock(&mu_);
    ReleaseLocked();
    if (stopped_) return;
  }
}

void EventLoop::Run() {
  RunTasks();  // Returns stopped, not owning the loop.
  // A RunOrPost caller may still run a task: once Run() returns, nothing of
  // the loop's runs any more (its owner may go away).
  absl::MutexLock lock(&mu_);
  auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !owned_; };
  mu_.Await(absl::Condition(&released));
}

void EventLoop::OwnLocked() {
  owned_ = true;
  owner_ = std::this_thread::get_id();
}

void EventLoop::ReleaseLocked() {
  owner_ = std::thread::id();
  owned_ = false;  // Run()'s thread wakes if anything queued meanwhile.
}

void EventLoop::RunTask(std::function<void()>& task) {
  LogBatch lines;  // What the task logs is written once it is done.
  task();
  RunDeferred(running_deferred_, /*posted_between=*/true);
}

bool EventLoop::RunIfFree(std::function<void()>& task) {
  {
    absl::MutexLock lock(&mu_);
    // Not ahead of what waits, nor beside what runs.
    if (stopped_ || owned_ || !tasks_.empty() || !bulk_.empty()) return false;
    OwnLocked();
  }
  lag_observer_(absl::ZeroDuration());
  RunTask(task);
  absl::MutexLock lock(&mu_);
  ReleaseLocked();
  return true;
}

void EventLoop::RunOrPost(std::function<void()> task) {
  if (!RunIfFree(task)) Post(std::move(task));
}

void EventLoop::RunOrPostBulk(std::function<void()> task) {
  if (!RunIfFree(task)) PostBulk(std::move(task));
}

void EventLoop::RunDeferred(std::vector<std::function<void()>>& running, bool posted_between) {
  while (!deferred_.empty()) {
    running.swap(deferred_);
    for (std::function<void()>& task : running) {
      task();
      if (posted_between) RunPostedBetween();
    }
    running.clear();
  }
}

void EventLoop::RunPostedBetween() {
  // Only on Run()'s thread: a RunOrPost caller runs its own task, never others
  // (they may wait for the gRPC thread it is). Not while tasks posted before
  // them wait in this turn: posting order holds (a request's input must not
  // pass the task that starts the request). Read without the lock first: this
  // runs after every deferred task.
  if (std::this_thread::get_id() != run_thread_.load(std::memory_order_relaxed) ||
      batch_waiting_ > 0 || !posted_waiting_.load(std::memory_order_relaxed)) {
    return;
  }
  std::deque<std::pair<absl::Time, std::function<void()>>> posted;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || tasks_.empty()) return;
    posted.swap(tasks_);
    posted_waiting_.store(false, std::memory_order_relaxed);
  }
  std::vector<std::function<void()>> running;
  while (!posted.empty()) {
    auto [when, task] = std::move(posted.front());
    posted.pop_front();
    lag_observer_(absl::Now() - when);
    std::vector<std::function<void()>> earlier;  // Deferred before this task: kept for later.
    earlier.swap(deferred_);
    task();
    RunDeferred(running, /*posted_between=*/false);
    deferred_ = std::move(earlier);
    absl::MutexLock lock(&mu_);
    if (stopped_) return;  // As the loop's turn drops its tasks.
  }
}

void EventLoop::Defer(std::function<void()> task) {
  if (!InLoop()) {  // Not the owner's thread: nothing runs here to wait for.
    Post(std::move(task));
    return;
  }
  deferred_.push_back(std::move(task));
}

void EventLoop::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

void EventLoop::Post(std::function<void()> task) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  tasks_.emplace_back(now, std::move(task));
  posted_waiting_.store(true, std::memory_order_relaxed);
}

void EventLoop::PostBulk(std::function<void()> task) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  bulk_.emplace_back(now, std::move(task));
}

EventLoop::TimerId EventLoop::PostAt(absl::Time when, std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  const TimerId id = next_timer_++;
  timers_.emplace(std::make_pair(when, id), std::move(task));
  timer_deadlines_.emplace(id, when);
  return id;
}

void EventLoop::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return;
  timers_.erase(std::make_pair(it->second, id));
  timer_deadlines_.erase(it);
}

LoopThread::LoopThread(EventLoop* loop) : loop_(loop), thread_([loop] { loop->Run(); }) {}

LoopThread::~LoopThread() {
  loop_->Stop();
  thread_.join();
}

void LoopThread::RunAndWait(std::function<void()> task) {
  absl::Notification done;
  loop_->Post([&] {
    task();
    done.Notify();
  });
  done.WaitForNotification();
}

}  // namespace omnistage
