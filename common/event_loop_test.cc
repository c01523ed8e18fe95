// Tests for EventLoop (its owner's Defer and RunOrPost: event_loop_owner_test).
// The loop waits on real time, so these tests use short real timeouts (code
// whose job is to block cannot be tested on a manual clock); every bound is
// generous because the test machines are small and noisy.
#include "common/event_loop.h"

#include <time.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/event_loop_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

// A loop already running on its own thread.
class RunningLoop {
 public:
  RunningLoop() : thread_(&loop_) {}
  EventLoop& loop() { return loop_; }

  // Blocks until every task posted before this call has run.
  void Drain() {
    absl::Notification drained;
    loop_.Post([&drained] { drained.Notify(); });
    ASSERT_TRUE(drained.WaitForNotificationWithTimeout(kGenerous));
  }

 private:
  EventLoop loop_;
  WatchedLoop thread_;
};

absl::Duration ThreadCpuTime() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

TEST(EventLoopTest, LagObserverHearsEveryTaskAndHowLongItWaited) {
  EventLoop loop;
  absl::Mutex mu;
  std::vector<absl::Duration> lags;
  loop.set_lag_observer([&](absl::Duration lag) {
    absl::MutexLock lock(&mu);
    lags.push_back(lag);
  });
  WatchedLoop thread(&loop);
  absl::Notification release, done;
  loop.Post([&] { release.WaitForNotification(); });
  loop.Post([&] { done.Notify(); });  // Waits behind the first.
  absl::SleepFor(absl::Milliseconds(30));
  release.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  absl::MutexLock lock(&mu);
  ASSERT_EQ(lags.size(), 2u);
  EXPECT_GE(lags[0], absl::ZeroDuration());
  EXPECT_GE(lags[1], absl::Milliseconds(30));
}

TEST(EventLoopTest, TasksRunInPostingOrderOnTheLoopThread) {
  EventLoop loop;
  EXPECT_FALSE(loop.InLoop()) << "no loop thread before Run()";
  // Posting before Run() is allowed; the tasks wait for it.
  std::vector<int> order;  // Touched only on the loop thread.
  bool all_in_loop = true;
  absl::Notification done;
  for (int i = 0; i < 100; ++i) {
    loop.Post([&, i] {
      all_in_loop = all_in_loop && loop.InLoop();
      order.push_back(i);
    });
  }
  loop.Post([&] { done.Notify(); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_FALSE(loop.InLoop());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(all_in_loop);
}

TEST(EventLoopTest, PostFromManyThreadsRunsEveryTaskOnceInEachPostersOrder) {
  RunningLoop running;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  // Loop-thread state: the next index expected from each poster.
  std::vector<int> next(kThreads, 0);
  int out_of_order = 0;
  int ran = 0;
  {
    std::vector<std::thread> posters;
    for (int t = 0; t < kThreads; ++t) {
      posters.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          running.loop().Post([&, t, i] {
            if (next[t] != i) ++out_of_order;
            next[t] = i + 1;
            ++ran;
          });
        }
      });
    }
    for (std::thread& poster : posters) poster.join();
  }
  // FIFO: this runs after everything the posters queued.
  running.Drain();
  EXPECT_EQ(ran, kThreads * kPerThread);
  EXPECT_EQ(out_of_order, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
}

TEST(EventLoopTest, TaskPostedFromATaskRunsAfterItAndAfterQueuedTasks) {
  EventLoop loop;
  std::vector<std::string> order;
  absl::Notification done;
  loop.Post([&] {
    loop.Post([&] {
      order.push_back("inner");
      done.Notify();
    });
    order.push_back("outer returns");
  });
  loop.Post([&] { order.push_back("queued before inner"); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("outer returns", "queued before inner", "inner"));
}

// A backlog of bulk work (worker outputs) does not hold up control work: each
// turn runs what was Post()ed, then one bulk task. Bulk tasks keep their order.
TEST(EventLoopTest, PostedTasksPassQueuedBulkTasksButBulkKeepsMoving) {
  EventLoop loop;
  std::vector<std::string> order;  // Touched only on the loop thread.
  absl::Notification done;
  // Queued before Run(): one turn sees all of them.
  for (int i = 0; i < 3; ++i) loop.PostBulk([&, i] { order.push_back("bulk" + std::to_string(i)); });
  loop.Post([&] {
    order.push_back("control0");
    // Posted while the turn runs: goes in the next turn, before bulk1.
    loop.Post([&] { order.push_back("control1"); });
  });
  loop.PostBulk([&] {
    order.push_back("bulk3");
    done.Notify();
  });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("control0", "bulk0", "control1", "bulk1", "bulk2", "bulk3"));
}

TEST(EventLoopTest, TimersFireInDeadlineOrderAndNotEarly) {
  RunningLoop running;
  EventLoop& loop = running.loop();
  struct Fired {
    std::string name;
    bool early;
  };
  std::vector<Fired> fired;  // Touched only on the loop thread.
  absl::Notification last;
  const absl::Time start = absl::Now();
  auto timer = [&](std::string name, absl::Duration delay) {
    const absl::Time deadline = start + delay;
    loop.PostAt(deadline, [&, name, deadline] {
      fired.push_back({name, absl::Now() < deadline});
      if (fired.size() == 4) last.Notify();
    });
  };
  timer("60ms", absl::Milliseconds(60));
  timer("20ms", absl::Milliseconds(20));
  timer("40ms", absl::Milliseconds(40));
  timer("40ms again", absl::Milliseconds(40));  // Equal deadlines: posting order.
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(kGenerous));
  ASSERT_EQ(fired.size(), 4u);
  EXPECT_EQ(fired[0].name, "20ms");
  EXPECT_EQ(fired[1].name, "40ms");
  EXPECT_EQ(fired[2].name, "40ms again");
  EXPECT_EQ(fired[3].name, "60ms");
  for (const Fired& f : fired) EXPECT_FALSE(f.early) << f.name << " fired before its deadline";
}

TEST(EventLoopTest, TimerDueNowRunsAfterTasksAlreadyQueued) {
  EventLoop loop;
  std::vector<std::string> order;
  absl::Notification done;
  loop.PostAt(absl::Now() - absl::Milliseconds(1), [&] {
    order.push_back("timer");
    done.Notify();
  });
  loop.Post([&] { order.push_back("task"); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("task", "timer"));
}

// The loop sleeps until its earliest timer; a timer posted later but due sooner
// must wake it, or it would oversleep until the far one.
TEST(EventLoopTest, EarlierTimerPostedLaterWakesTheSleepingLoop) {
  RunningLoop running;
  EventLoop& loop = running.loop();
  bool far_fired = false;
  loop.PostAfter(absl::Seconds(10), [&] { far_fired = true; });
  running.Drain();
  // Let the loop go back to sleep on the 10 s deadline.
  absl::SleepFor(absl::Milliseconds(20));

  absl::Notification near_fired;
  const absl::Time posted = absl::Now();
  loop.PostAfter(absl::Milliseconds(50), [&] { near_fired.Notify(); });
  ASSERT_TRUE(near_fired.WaitForNotificationWithTimeout(absl::Seconds(2)))
      << "the loop kept sleeping until the 10 s timer";
  EXPECT_GE(absl::Now() - posted, absl::Milliseconds(50));
  running.Drain();
  EXPECT_FALSE(far_fired);
}

TEST(EventLoopTest, TimerPostedToAnIdleLoopWakesIt) {
  RunningLoop running;
  running.Drain();
  absl::SleepFor(absl::Milliseconds(20));  // Idle, with no deadline at all.
  absl::Notification fired;
  running.loop().PostAfter(absl::Milliseconds(10), [&] { fired.Notify(); });
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(2)));
}

TEST(EventLoopTest, CancelledTimerDoesNotRun) {
  RunningLoop running;
  EventLoop& loop = running.loop();
  std::atomic<bool> cancelled_ran{false};
  const EventLoop::TimerId id =
      loop.PostAfter(absl::Milliseconds(30), [&] { cancelled_ran = true; });
  loop.Cancel(id);
  absl::Notification later;
  loop.PostAfter(absl::Milliseconds(80), [&] { later.Notify(); });
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_FALSE(cancelled_ran);
}

TEST(EventLoopTest, CancelOfFiredOrUnknownTimerIsANoOp) {
  RunningLoop running;
  EventLoop& loop = running.loop();
  int fired = 0;
  absl::Notification first;
  const EventLoop::TimerId id = loop.PostAfter(absl::Milliseconds(1), [&] {
    ++fired;
    first.Notify();
  });
  ASSERT_TRUE(first.WaitForNotificationWithTimeout(kGenerous));
  loop.Cancel(id);
  loop.Cancel(id);
  loop.Cancel(id + 1000);
  // The loop still works and other timers are unaffected.
  absl::Notification second;
  loop.PostAfter(absl::Milliseconds(1), [&] { second.Notify(); });
  ASSERT_TRUE(second.WaitForNotificationWithTimeout(kGenerous));
  running.Drain();
  EXPECT_EQ(fired, 1);
}

// A task that cancels a timer due in the same pass of the loop (say, a request
// that completed just as its deadline passed) must still stop it: "not fired" is
// what Cancel promises, and a late deadline would emit a second terminal output.
TEST(EventLoopTest, CancelFromATaskStopsATimerDueInTheSamePass) {
  EventLoop loop;
  bool timer_ran = false;
  const EventLoop::TimerId due =
      loop.PostAt(absl::Now() - absl::Milliseconds(5), [&] { timer_ran = true; });
  loop.Post([&] { loop.Cancel(due); });
  absl::Notification done;
  loop.PostAfter(absl::Milliseconds(20), [&] { done.Notify(); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_FALSE(timer_ran);
}

TEST(EventLoopTest, TimerCanCancelALaterTimerDueInTheSamePass) {
  EventLoop loop;
  const absl::Time past = absl::Now() - absl::Milliseconds(5);
  EventLoop::TimerId second = 0;
  bool second_ran = false;
  loop.PostAt(past - absl::Milliseconds(1), [&] { loop.Cancel(second); });
  second = loop.PostAt(past, [&] { second_ran = true; });
  absl::Notification done;
  loop.PostAfter(absl::Milliseconds(20), [&] { done.Notify(); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_FALSE(second_ran);
}

TEST(EventLoopTest, StopFromAnotherThreadEndsAnIdleLoopPromptly) {
  EventLoop loop;
  WatchedLoop thread(&loop);
  absl::Notification started;
  loop.Post([&] { started.Notify(); });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kGenerous));
  absl::SleepFor(absl::Milliseconds(20));  // Blocked, with no timer to wake it.
  const absl::Time stop = absl::Now();
  loop.Stop();
  EXPECT_TRUE(thread.WaitForReturn(absl::Seconds(2)));
  EXPECT_LT(absl::Now() - stop, absl::Seconds(1));
}

TEST(EventLoopTest, StopEndsALoopWaitingForAFarTimer) {
  EventLoop loop;
  bool far_fired = false;
  loop.PostAfter(absl::Seconds(30), [&] { far_fired = true; });
  WatchedLoop thread(&loop);
  absl::Notification started;
  loop.Post([&] { started.Notify(); });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kGenerous));
  absl::SleepFor(absl::Milliseconds(20));
  loop.Stop();
  EXPECT_TRUE(thread.WaitForReturn(absl::Seconds(2)));
  thread.Join();
  EXPECT_FALSE(far_fired);
}

TEST(EventLoopTest, StopBeforeRunMakesRunReturnAtOnce) {
  EventLoop loop;
  bool ran = false;
  loop.Post([&] { ran = true; });
  loop.Stop();
  loop.Run();  // Would block forever if Stop() were lost.
  EXPECT_FALSE(ran);
}

TEST(EventLoopTest, StopFromATaskDropsTheTasksQueuedAfterIt) {
  EventLoop loop;
  std::vector<std::string> order;
  loop.Post([&] { order.push_back("first"); });
  loop.Post([&] {
    order.push_back("stopper");
    loop.Stop();
  });
  loop.Post([&] { order.push_back("dropped"); });
  loop.PostAt(absl::Now() - absl::Milliseconds(1), [&] { order.push_back("dropped timer"); });
  loop.Run();  // Returns on this thread once the stopper ran.
  EXPECT_THAT(order, ElementsAre("first", "stopper"));
}

// An idle loop blocks until its next deadline instead of polling. CPU time of the
// loop thread is read from inside tasks, so only the loop's own work counts.
TEST(EventLoopTest, IdleLoopDoesNotSpin) {
  RunningLoop running;
  EventLoop& loop = running.loop();
  loop.PostAfter(absl::Seconds(10), [] {});
  absl::Duration before;
  absl::Duration after;
  absl::Notification measured;
  loop.Post([&] {
    before = ThreadCpuTime();
    measured.Notify();
  });
  ASSERT_TRUE(measured.WaitForNotificationWithTimeout(kGenerous));
  absl::SleepFor(absl::Milliseconds(200));
  absl::Notification measured_again;
  loop.Post([&] {
    after = ThreadCpuTime();
    measured_again.Notify();
  });
  ASSERT_TRUE(measured_again.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_LT(after - before, absl::Milliseconds(20)) << "the idle loop burned CPU";
}

TEST(LoopThreadTest, RunsTheLoopUntilDestroyed) {
  EventLoop loop;
  std::thread::id ran_on;
  bool in_loop = false;
  {
    LoopThread thread(&loop);
    thread.RunAndWait([&] {
      ran_on = std::this_thread::get_id();
      in_loop = loop.InLoop();
    });
    EXPECT_NE(ran_on, std::this_thread::get_id());
    EXPECT_TRUE(in_loop);
  }
  // The destructor returned: the loop stopped and its thread was joined.
}

}  // namespace
}  // namespace omnistage
