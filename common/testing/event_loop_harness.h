// What the EventLoop tests share: a bound on waits, a loop running on a thread
// of its own that is stopped and joined whatever the test's outcome, and a
// wait until a loop is free.
#ifndef OMNISTAGE_COMMON_TESTING_EVENT_LOOP_HARNESS_H_
#define OMNISTAGE_COMMON_TESTING_EVENT_LOOP_HARNESS_H_

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/event_loop.h"

namespace omnistage {

// Far longer than any correct run needs; only a broken loop waits this long.
inline constexpr absl::Duration kGenerous = absl::Seconds(5);

// Runs a loop on its own thread; stops it and joins when destroyed, so a failed
// assertion cannot leave the thread running.
class WatchedLoop {
 public:
  explicit WatchedLoop(EventLoop* loop)
      : loop_(loop), thread_([this] {
          loop_->Run();
          returned_.Notify();
        }) {}
  ~WatchedLoop() {
    loop_->Stop();
    Join();
  }

  // Whether Run() returned within `timeout`.
  bool WaitForReturn(absl::Duration timeout) {
    return returned_.WaitForNotificationWithTimeout(timeout);
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  EventLoop* const loop_;
  absl::Notification returned_;
  std::thread thread_;
};

// Returns once `loop` is free (its thread sleeps, nothing runs or waits), as
// seen by running a task on this thread through RunOrPost. With nothing posted
// after it, what reaches the loop next finds it free: tests of the work that
// runs on the thread handing it over then.
inline void WaitUntilFree(EventLoop* loop) {
  while (true) {
    absl::Notification ran;
    std::thread::id on;
    loop->RunOrPost([&] {
      on = std::this_thread::get_id();
      ran.Notify();
    });
    ran.WaitForNotification();
    if (on == std::this_thread::get_id()) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TESTING_EVENT_LOOP_HARNESS_H_
