// The stall rule on a clock passed in by hand, and the watchdog thread on the
// real one with short timeouts.
#include "stage_worker/step_watchdog.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(StallTrackerTest, ShortStepsNeverStall) {
  StallTracker tracker({absl::Seconds(5), absl::Seconds(20)});
  EXPECT_EQ(tracker.NextDue(), absl::InfiniteFuture()) << "idle: nothing can be due";
  for (int step = 1; step <= 3; ++step) {
    tracker.StepBegan(step, kT0 + absl::Seconds(step));
    EXPECT_EQ(tracker.NextDue(), kT0 + absl::Seconds(step + 5));
    EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(step) + absl::Milliseconds(4999)),
              StallTracker::Due::kNothing);
    EXPECT_FALSE(tracker.StepEnded(step));
  }
  EXPECT_EQ(tracker.Check(kT0 + absl::Hours(1)), StallTracker::Due::kNothing);
}

TEST(StallTrackerTest, StallIsReportedOnceThenExitThenNothing) {
  StallTracker tracker({absl::Seconds(5), absl::Seconds(20)});
  tracker.StepBegan(7, kT0);
  EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(5)), StallTracker::Due::kStall);
  EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(6)), StallTracker::Due::kNothing);
  EXPECT_EQ(tracker.NextDue(), kT0 + absl::Seconds(20));
  EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(20)), StallTracker::Due::kExit);
  EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(30)), StallTracker::Due::kNothing);
  EXPECT_EQ(tracker.NextDue(), absl::InfiniteFuture());
}

TEST(StallTrackerTest, StalledStepThatReturnsIsARecoveryAndTheNextOneStartsAfresh) {
  StallTracker tracker({absl::Seconds(5), absl::ZeroDuration()});
  tracker.StepBegan(1, kT0);
  ASSERT_EQ(tracker.Check(kT0 + absl::Seconds(9)), StallTracker::Due::kStall);
  EXPECT_EQ(tracker.NextDue(), absl::InfiniteFuture()) << "no exit timeout: nothing more due";
  EXPECT_TRUE(tracker.StepEnded(1));
  tracker.StepBegan(2, kT0 + absl::Seconds(10));
  EXPECT_EQ(tracker.Check(kT0 + absl::Seconds(12)), StallTracker::Due::kNothing);
  EXPECT_FALSE(tracker.StepEnded(2));
}

TEST(StallTrackerTest, ZeroStallTimeoutWatchesNothing) {
  StallTracker tracker({absl::ZeroDuration(), absl::Seconds(1)});
  tracker.StepBegan(1, kT0);
  EXPECT_EQ(tracker.NextDue(), absl::InfiniteFuture());
  EXPECT_EQ(tracker.Check(kT0 + absl::Hours(1)), StallTracker::Due::kNothing);
}

// The thread, for real: a step held past the stall timeout is reported from the
// watchdog's thread, its end as a recovery; steps shorter than it are not.
TEST(StepWatchdogTest, ReportsAStallAndTheRecoveryOnTheRealClock) {
  absl::Notification stalled, recovered;
  std::atomic<uint64_t> stalled_step{0};
  StepWatchdog watchdog(
      {absl::Milliseconds(100), absl::ZeroDuration()},
      {[&](uint64_t step, absl::Duration running) {
         EXPECT_GE(running, absl::Milliseconds(100));
         stalled_step = step;
         stalled.Notify();
       },
       [](uint64_t, absl::Duration) { ADD_FAILURE() << "no exit timeout was set"; },
       [&](uint64_t step, absl::Duration took) {
         EXPECT_EQ(step, 2u);
         recovered.Notify();
       }});
  watchdog.StepBegan(1);
  watchdog.StepEnded(1);
  watchdog.StepBegan(2);
  ASSERT_TRUE(stalled.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(stalled_step, 2u);
  EXPECT_FALSE(recovered.HasBeenNotified());
  watchdog.StepEnded(2);
  EXPECT_TRUE(recovered.HasBeenNotified());
}

TEST(StepWatchdogTest, ExitIsAskedForPastTheExitTimeout) {
  absl::Notification exit;
  StepWatchdog watchdog({absl::Milliseconds(50), absl::Milliseconds(150)},
                        {[](uint64_t, absl::Duration) {},
                         [&](uint64_t step, absl::Duration running) {
                           EXPECT_GE(running, absl::Milliseconds(150));
                           exit.Notify();
                         },
                         [](uint64_t, absl::Duration) {}});
  watchdog.StepBegan(1);
  EXPECT_TRUE(exit.WaitForNotificationWithTimeout(absl::Seconds(10)));
  watchdog.StepEnded(1);
}

}  // namespace
}  // namespace omnistage
