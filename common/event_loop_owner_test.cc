// Tests for the EventLoop's owner: work a task defers (and tasks posted meanwhile
// running between its parts), RunOrPost running a task
// on the caller's thread when the loop is free, and Run() returning only once
// no such task runs. Real threads and short real waits, like event_loop_test.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/testing/event_loop_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

// What a task defers runs when it returns, before the tasks queued behind it;
// what a deferred task defers runs before anything else too, in order.
TEST(EventLoopTest, DeferredWorkRunsWhenTheTaskReturnsBeforeQueuedTasks) {
  EventLoop loop;
  std::vector<std::string> order;  // Touched only on the loop thread.
  absl::Notification done;
  loop.Post([&] {
    loop.Defer([&] {
      order.push_back("deferred 1");
      loop.Defer([&] { order.push_back("deferred by deferred"); });
    });
    loop.Defer([&] { order.push_back("deferred 2"); });
    order.push_back("task returns");
  });
  loop.Post([&] {
    order.push_back("queued task");
    done.Notify();
  });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("task returns", "deferred 1", "deferred 2", "deferred by deferred",
                                 "queued task"));
}

// A task Post()ed while deferred work runs does not wait for the rest of it: it
// runs between two deferred tasks, what it defers right after it, and what was
// deferred before it keeps its place; bulk work still waits for the turn.
TEST(EventLoopTest, APostedTaskRunsBetweenDeferredTasks) {
  EventLoop loop;
  std::vector<std::string> order;  // Touched only on the loop thread.
  absl::Notification done;
  loop.Post([&] {
    loop.Defer([&] {
      order.push_back("deferred 1");
      loop.Post([&] {
        order.push_back("posted");
        loop.Defer([&] { order.push_back("deferred by posted"); });
      });
      loop.PostBulk([&] {
        order.push_back("bulk");
        done.Notify();
      });
      loop.Defer([&] { order.push_back("deferred by deferred 1"); });
    });
    loop.Defer([&] { order.push_back("deferred 2"); });
    order.push_back("task returns");
  });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("task returns", "deferred 1", "posted", "deferred by posted",
                                 "deferred 2", "deferred by deferred 1", "bulk"));
}

// A task Post()ed while deferred work runs does not pass the tasks posted
// before it that wait in the same turn (a request's input posted after the
// task that starts the request, and run first, would find no request).
TEST(EventLoopTest, APostedTaskDoesNotPassTasksPostedBeforeIt) {
  EventLoop loop;
  std::vector<std::string> order;  // Touched only on the loop thread.
  absl::Notification done;
  loop.Post([&] {
    loop.Defer([&] {
      order.push_back("deferred");
      loop.Post([&] {
        order.push_back("posted later");
        done.Notify();
      });
      loop.Defer([&] { order.push_back("deferred by deferred"); });
    });
    order.push_back("task returns");
  });
  loop.Post([&] { order.push_back("posted earlier"); });
  WatchedLoop thread(&loop);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("task returns", "deferred", "deferred by deferred",
                                 "posted earlier", "posted later"));
}

// A RunOrPost caller runs its own task and what that defers, never others
// posted meanwhile: those may wait for the very gRPC thread it is.
TEST(EventLoopTest, ARunOrPostCallerRunsNoPostedTaskBetweenItsDeferredTasks) {
  EventLoop loop;
  WatchedLoop thread(&loop);
  const std::thread::id here = std::this_thread::get_id();
  std::thread::id posted_on;
  absl::Notification done;
  std::vector<std::string> order;  // Touched by whoever owns the loop.
  bool ran_here = false;
  loop.RunOrPost([&] {
    ran_here = true;
    loop.Defer([&] {
      order.push_back("deferred 1");
      loop.Post([&] {
        posted_on = std::this_thread::get_id();
        order.push_back("posted");
        done.Notify();
      });
    });
    loop.Defer([&] { order.push_back("deferred 2"); });
  });
  ASSERT_TRUE(ran_here) << "the loop was not free";
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_NE(posted_on, here);
  EXPECT_THAT(order, ElementsAre("deferred 1", "deferred 2", "posted"));
}

// A timer's deferred work runs when the timer returns; Defer from another
// thread is a Post.
TEST(EventLoopTest, DeferRunsAfterATimerAndIsAPostFromOtherThreads) {
  EventLoop loop;
  std::vector<std::string> order;
  absl::Notification done;
  loop.PostAfter(absl::Milliseconds(1), [&] {
    loop.Defer([&] { order.push_back("deferred by timer"); });
    order.push_back("timer");
  });
  loop.PostAfter(absl::Milliseconds(50), [&] {
    order.push_back("later timer");
    done.Notify();
  });
  WatchedLoop thread(&loop);
  absl::Notification posted;
  loop.Defer([&] {  // This thread is not the loop's.
    order.push_back("from another thread");
    posted.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  ASSERT_TRUE(posted.WaitForNotificationWithTimeout(kGenerous));
  // When the other thread's task ran against the first timer is up to the
  // machine; the rest is not.
  order.erase(std::find(order.begin(), order.end(), "from another thread"));
  EXPECT_THAT(order, ElementsAre("timer", "deferred by timer", "later timer"));
}

// RunOrPost runs on the caller's thread, as the loop's owner, when the loop is
// free; behind a running or queued task it is a Post, in order.
TEST(EventLoopTest, RunOrPostRunsHereWhenTheLoopIsFreeAndQueuesOtherwise) {
  EventLoop loop;
  WatchedLoop thread(&loop);
  // Free: runs here, and the loop counts it as its own.
  bool ran_here = false;
  bool in_loop = false;
  std::vector<std::string> order;  // Touched by whoever owns the loop.
  loop.RunOrPost([&] {
    ran_here = true;
    in_loop = loop.InLoop();
    loop.Defer([&] { order.push_back("deferred by inline"); });
    order.push_back("inline");
  });
  EXPECT_TRUE(ran_here);
  EXPECT_TRUE(in_loop);
  EXPECT_FALSE(loop.InLoop()) << "still the owner after the task";
  EXPECT_THAT(order, ElementsAre("inline", "deferred by inline"));

  // Busy: a task holds the loop; RunOrPost from here queues behind it.
  absl::Notification running, release, done;
  loop.Post([&] {
    running.Notify();
    release.WaitForNotification();
    order.push_back("busy task");
  });
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(kGenerous));
  const std::thread::id here = std::this_thread::get_id();
  std::thread::id ran_on;
  loop.RunOrPostBulk([&] {
    ran_on = std::this_thread::get_id();
    order.push_back("queued");
    done.Notify();
  });
  EXPECT_EQ(order.size(), 2u) << "ran beside the busy task";
  release.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_NE(ran_on, here);
  EXPECT_THAT(order, ElementsAre("inline", "deferred by inline", "busy task", "queued"));
}

// Tasks a RunOrPost caller's task posts, and timers falling due meanwhile, run
// on the loop's thread once it is done.
TEST(EventLoopTest, WhatQueuesWhileACallerRunsATaskRunsAfterIt) {
  EventLoop loop;
  WatchedLoop thread(&loop);
  std::vector<std::string> order;
  absl::Notification done;
  loop.RunOrPost([&] {
    loop.Post([&] {
      order.push_back("posted by inline");
      done.Notify();
    });
    loop.PostAfter(absl::ZeroDuration(), [&] { order.push_back("timer"); });
    absl::SleepFor(absl::Milliseconds(20));  // The loop thread must not run them now.
    order.push_back("inline");
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  absl::Notification drained;
  loop.Post([&] { drained.Notify(); });
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(kGenerous));
  EXPECT_THAT(order, ElementsAre("inline", "posted by inline", "timer"));
}

// Run() does not return while a RunOrPost caller runs a task: once it has
// returned, whoever owns what the tasks touch may let it go.
TEST(EventLoopTest, RunReturnsOnlyOnceNoRunOrPostTaskRuns) {
  EventLoop loop;
  auto watched = std::make_unique<WatchedLoop>(&loop);
  absl::Notification running, release;
  std::atomic<bool> task_done{false};
  std::thread caller([&] {
    loop.RunOrPost([&] {
      running.Notify();
      release.WaitForNotification();
      task_done = true;
    });
  });
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(kGenerous));
  loop.Stop();
  EXPECT_FALSE(watched->WaitForReturn(absl::Milliseconds(100)))
      << "Run() returned while a task ran";
  release.Notify();
  EXPECT_TRUE(watched->WaitForReturn(kGenerous));
  EXPECT_TRUE(task_done.load());
  caller.join();
  // Stopped: RunOrPost runs nothing more.
  bool ran = false;
  loop.RunOrPost([&] { ran = true; });
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace omnistage
